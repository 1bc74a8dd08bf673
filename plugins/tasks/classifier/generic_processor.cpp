#include "generic_processor.h"

#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tsv_reader.h"

namespace bertlab::classifier {

namespace fs = std::filesystem;

namespace {

/// The 0-based field index of `column` in a TSV file: its position in `header` when the file
/// has one, else the number itself (from_config has checked it is one).
size_t resolve_column(const fs::path& file, const std::vector<std::string>* header,
                      const std::string& key, const std::string& column) {
  if (header == nullptr) return std::stoul(column);
  const auto it = std::find(header->begin(), header->end(), column);
  BERTLAB_CHECK_AS(DataError, it != header->end(),
                   "{}:1: the header has no column \"{}\" (task.{}); its columns are {}; set "
                   "task.{} to one of them, or header = false and a 0-based index",
                   file.string(), column, key, fmt::join(*header, ", "), key);
  return static_cast<size_t>(it - header->begin());
}

/// The string value of `key` in a JSONL object; throws DataError naming `where` otherwise.
std::string json_text(const nlohmann::json& object, const std::string& key,
                      const std::string& where, const char* option) {
  const auto it = object.find(key);
  BERTLAB_CHECK_AS(DataError, it != object.end(),
                   "{}: no key \"{}\" (task.{}); expected an object with the keys the task "
                   "options name",
                   where, key, option);
  BERTLAB_CHECK_AS(DataError, it->is_string(), "{}: \"{}\" is {}, expected a string", where, key,
                   it->dump());
  return it->get<std::string>();
}

/// A JSONL label as a string: a string as is, an integer or a bool in decimal / true|false,
/// and (regression) any number.
std::string json_label(const nlohmann::json& object, const std::string& key,
                       const std::string& where, bool regression) {
  const auto it = object.find(key);
  BERTLAB_CHECK_AS(DataError, it != object.end(),
                   "{}: no key \"{}\" (task.label_column); expected an object with the keys the "
                   "task options name",
                   where, key);
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer() || it->is_boolean()) return it->dump();
  if (regression && it->is_number()) return it->dump();
  throw DataError(fmt::format("{}: label \"{}\" is {}, expected {}", where, key, it->dump(),
                              regression ? "a number" : "a string or an integer"));
}

}  // namespace

GenericProcessor::GenericProcessor(std::string format, GenericFormatOptions options)
    : format_(std::move(format)), options_(std::move(options)) {}

std::vector<InputExample> GenericProcessor::train_examples(const fs::path& data_dir) const {
  return read(data_dir / options_.train_file, "train");
}

std::vector<InputExample> GenericProcessor::dev_examples(const fs::path& data_dir) const {
  return read(data_dir / options_.dev_file, "dev");
}

MetricSet GenericProcessor::metric_set() const {
  if (options_.regression) return MetricSet::kPearsonSpearman;
  return options_.label_list.size() == 2 ? MetricSet::kAccuracyAndF1 : MetricSet::kAccuracy;
}

std::vector<InputExample> GenericProcessor::read(const fs::path& file,
                                                 const std::string& set) const {
  return format_ == "jsonl" ? read_jsonl_file(file, set) : read_tsv_file(file, set);
}

void GenericProcessor::check_label(const std::string& where, const std::string& column,
                                   const std::string& label) const {
  if (options_.regression) {
    BERTLAB_CHECK_AS(DataError, parse_score(label).has_value(),
                     "{}: label \"{}\" in column \"{}\" is not a number; regression = true "
                     "expects a decimal such as 3.8",
                     where, label, column);
    return;
  }
  const auto& labels = options_.label_list;
  BERTLAB_CHECK_AS(
      DataError, std::find(labels.begin(), labels.end(), label) != labels.end(),
      "{}: unknown label \"{}\" in column \"{}\"; expected one of {} (task.label_list)", where,
      label, column, fmt::join(labels, "|"));
}

std::vector<InputExample> GenericProcessor::read_tsv_file(const fs::path& file,
                                                          const std::string& set) const {
  const std::vector<TsvRow> rows = read_tsv(file);
  const std::vector<std::string>* header = nullptr;
  if (options_.header) {
    BERTLAB_CHECK_AS(DataError, !rows.empty(),
                     "{}: the file is empty; header = true expects a first line naming the "
                     "columns",
                     file.string());
    header = &rows[0].fields;
  }
  const size_t a = resolve_column(file, header, "text_a_column", options_.text_a_column);
  const bool pair = !options_.text_b_column.empty();
  const size_t b = pair ? resolve_column(file, header, "text_b_column", options_.text_b_column) : 0;
  const size_t label = resolve_column(file, header, "label_column", options_.label_column);
  const size_t needed = std::max({a, pair ? b : 0, label}) + 1;

  std::vector<InputExample> examples;
  for (size_t i = options_.header ? 1 : 0; i < rows.size(); ++i) {
    const TsvRow& row = rows[i];
    const std::string where = fmt::format("{}:{}", file.string(), row.line);
    BERTLAB_CHECK_AS(DataError, row.fields.size() >= needed,
                     "{}: expected at least {} tab-separated columns (text_a_column \"{}\", "
                     "label_column \"{}\"{}), found {}",
                     where, needed, options_.text_a_column, options_.label_column,
                     pair ? fmt::format(", text_b_column \"{}\"", options_.text_b_column) : "",
                     row.fields.size());
    check_label(where, options_.label_column, row.fields[label]);
    examples.push_back({fmt::format("{}-{}", set, row.line - 1), row.fields[a],
                        pair ? row.fields[b] : "", row.fields[label]});
  }
  return examples;
}

std::vector<InputExample> GenericProcessor::read_jsonl_file(const fs::path& file,
                                                            const std::string& set) const {
  std::vector<InputExample> examples;
  for (const TextLine& line : read_lines(file)) {
    if (line.text.find_first_not_of(" \t") == std::string::npos) continue;  // blank line
    const std::string where = fmt::format("{}:{}", file.string(), line.line);
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(line.text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (1e400)
      throw DataError(fmt::format("{}: not valid JSON ({}); expected one JSON object per line",
                                  where, e.what()));
    }
    BERTLAB_CHECK_AS(DataError, object.is_object(),
                     "{}: found {} where a JSON object was expected (one object per line)", where,
                     object.type_name());
    InputExample example;
    example.guid = fmt::format("{}-{}", set, line.line - 1);
    example.text_a = json_text(object, options_.text_a_column, where, "text_a_column");
    if (!options_.text_b_column.empty()) {
      example.text_b = json_text(object, options_.text_b_column, where, "text_b_column");
    }
    example.label = json_label(object, options_.label_column, where, options_.regression);
    check_label(where, options_.label_column, example.label);
    examples.push_back(std::move(example));
  }
  return examples;
}

}  // namespace bertlab::classifier
