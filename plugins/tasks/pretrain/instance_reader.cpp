#include "instance_reader.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>

namespace bertlab::pretrain {

namespace fs = std::filesystem;

namespace {

// The seven features of one instance, checked against the lengths the task expects.
InstanceFeatures check_features(InstanceFeatures f, const std::string& where,
                                const InstanceShape& shape) {
  const int64_t seq = shape.max_seq_length;
  const int64_t predictions = shape.max_predictions_per_seq;
  const auto expect = [&](const char* name, size_t got, int64_t want) {
    if (static_cast<int64_t>(got) != want) {
      throw DataError(fmt::format(
          "{}: {} has {} values, expected {}; create the data with the task's max_seq_length "
          "and max_predictions_per_seq",
          where, name, got, want));
    }
  };
  expect("input_ids", f.input_ids.size(), seq);
  expect("input_mask", f.input_mask.size(), seq);
  expect("segment_ids", f.segment_ids.size(), seq);
  expect("masked_lm_positions", f.masked_lm_positions.size(), predictions);
  expect("masked_lm_ids", f.masked_lm_ids.size(), predictions);
  expect("masked_lm_weights", f.masked_lm_weights.size(), predictions);
  expect("next_sentence_labels", f.next_sentence_labels.size(), 1);
  for (const int64_t p : f.masked_lm_positions) {
    if (p < 0 || p >= seq) {
      throw DataError(
          fmt::format("{}: masked_lm_positions holds {}, outside [0, {})", where, p, seq));
    }
  }
  if (shape.vocab_size > 0) {
    for (const int64_t id : f.input_ids) {
      if (id < 0 || id >= shape.vocab_size) {
        throw DataError(fmt::format(
            "{}: token id {} is outside the model's vocab_size {}; create the data with the "
            "model's vocab.txt",
            where, id, shape.vocab_size));
      }
    }
  }
  return f;
}

template <typename T>
std::vector<T> json_list(const nlohmann::json& line, const char* name, const std::string& where) {
  const auto it = line.find(name);
  if (it == line.end() || !it->is_array()) {
    throw DataError(fmt::format("{}: no \"{}\" list (the features of create-data)", where, name));
  }
  std::vector<T> out;
  out.reserve(it->size());
  for (const auto& v : *it) {
    // Ids and positions are integers; a float such as 1e300 would not fit (and converting it
    // is undefined), so only the weights may be any number.
    const bool fits = std::is_integral_v<T>
                          ? (v.is_number_integer() &&
                             !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
                          : v.is_number();
    if (!fits) {
      throw DataError(fmt::format("{}: \"{}\" holds {}, not {}", where, name, v.dump(),
                                  std::is_integral_v<T> ? "an integer" : "a number"));
    }
    out.push_back(v.get<T>());
  }
  return out;
}

template <typename T>
std::vector<T> example_list(const ExampleFeatures& example, const char* name,
                            const std::string& where) {
  for (const auto& [key, values] : example) {
    if (key != name) continue;
    if (const auto* v = std::get_if<std::vector<T>>(&values)) return *v;
    throw DataError(
        fmt::format("{}: feature {} has the wrong kind (int64 or float list)", where, name));
  }
  throw DataError(fmt::format("{}: no feature \"{}\"", where, name));
}

InstanceFeatures parse_json_instance(const std::string& text, const std::string& where,
                                     const InstanceShape& shape) {
  nlohmann::json line;
  try {
    line = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, numbers too large
    throw DataError(fmt::format("{}: not JSON: {}", where, e.what()));
  }
  InstanceFeatures f;
  f.input_ids = json_list<int64_t>(line, "input_ids", where);
  f.input_mask = json_list<int64_t>(line, "input_mask", where);
  f.segment_ids = json_list<int64_t>(line, "segment_ids", where);
  f.masked_lm_positions = json_list<int64_t>(line, "masked_lm_positions", where);
  f.masked_lm_ids = json_list<int64_t>(line, "masked_lm_ids", where);
  f.masked_lm_weights = json_list<float>(line, "masked_lm_weights", where);
  f.next_sentence_labels = json_list<int64_t>(line, "next_sentence_labels", where);
  return check_features(std::move(f), where, shape);
}

InstanceFeatures parse_example_instance(const std::string& record, const std::string& where,
                                        const InstanceShape& shape) {
  const ExampleFeatures example = parse_example(record, where);
  InstanceFeatures f;
  f.input_ids = example_list<int64_t>(example, "input_ids", where);
  f.input_mask = example_list<int64_t>(example, "input_mask", where);
  f.segment_ids = example_list<int64_t>(example, "segment_ids", where);
  f.masked_lm_positions = example_list<int64_t>(example, "masked_lm_positions", where);
  f.masked_lm_ids = example_list<int64_t>(example, "masked_lm_ids", where);
  f.masked_lm_weights = example_list<float>(example, "masked_lm_weights", where);
  f.next_sentence_labels = example_list<int64_t>(example, "next_sentence_labels", where);
  return check_features(std::move(f), where, shape);
}

}  // namespace

bool is_jsonl(const fs::path& path) { return path.extension() == ".jsonl"; }

InstanceReader::InstanceReader(fs::path path, InstanceShape shape, FilePosition start)
    : path_(std::move(path)), shape_(shape), jsonl_(is_jsonl(path_)) {
  if (jsonl_) {
    lines_.open(path_, std::ios::binary);
    if (!lines_) throw DataError(fmt::format("{}: cannot read the instances", path_.string()));
    lines_.seekg(static_cast<std::streamoff>(start.offset));
    if (!lines_) {
      throw DataError(fmt::format("{}: cannot seek to byte {}", path_.string(), start.offset));
    }
    line_position_ = start;
  } else {
    records_.emplace(path_, start.offset, start.record);
  }
}

FilePosition InstanceReader::position() const {
  if (jsonl_) return line_position_;
  return FilePosition{records_->offset(), records_->index()};
}

bool InstanceReader::next(InstanceFeatures* out) {
  if (!jsonl_) {
    const int64_t index = records_->index();
    if (out == nullptr) return records_->next(nullptr);
    std::string record;
    if (!records_->next(&record)) return false;
    *out =
        parse_example_instance(record, fmt::format("{}: record {}", path_.string(), index), shape_);
    return true;
  }
  for (std::string text; std::getline(lines_, text);) {
    // A line read to its newline, or the file's last line without one.
    line_position_.offset += text.size() + (lines_.eof() ? 0 : 1);
    ++line_position_.record;
    if (text.empty() || text == "\r") continue;
    if (out != nullptr) {
      *out = parse_json_instance(text, fmt::format("{}:{}", path_.string(), line_position_.record),
                                 shape_);
    }
    return true;
  }
  return false;
}

std::vector<InstanceFeatures> read_instances(const fs::path& path, const InstanceShape& shape,
                                             int64_t limit) {
  InstanceReader reader(path, shape);
  std::vector<InstanceFeatures> out;
  for (InstanceFeatures f;
       (limit < 0 || static_cast<int64_t>(out.size()) < limit) && reader.next(&f);) {
    out.push_back(std::move(f));
  }
  if (out.empty()) {
    throw DataError(fmt::format("{}: no instances; create them with `bertlab pretrain create-data`",
                                path.string()));
  }
  return out;
}

Batch collate(const std::vector<InstanceFeatures>& set, const std::vector<int64_t>& indices,
              const c10::Device& device) {
  BERTLAB_CHECK(!indices.empty(), "cannot collate an empty batch");
  const auto rows = static_cast<int64_t>(indices.size());
  const auto& first = set.at(static_cast<size_t>(indices[0]));
  const auto seq = static_cast<int64_t>(first.input_ids.size());
  const auto predictions = static_cast<int64_t>(first.masked_lm_positions.size());
  const auto longs = [&](int64_t width, auto member) {
    at::Tensor t = at::empty({rows, width}, at::kLong);
    int64_t* out = t.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      const auto& values = set.at(static_cast<size_t>(indices[r])).*member;
      std::copy(values.begin(), values.end(), out + r * width);
    }
    return t.to(device);
  };
  at::Tensor weights = at::empty({rows, predictions}, at::kFloat);
  for (int64_t r = 0; r < rows; ++r) {
    const auto& w = set.at(static_cast<size_t>(indices[r])).masked_lm_weights;
    std::copy(w.begin(), w.end(), weights.data_ptr<float>() + r * predictions);
  }
  return Batch{
      {"input_ids", longs(seq, &InstanceFeatures::input_ids)},
      {"input_mask", longs(seq, &InstanceFeatures::input_mask)},
      {"segment_ids", longs(seq, &InstanceFeatures::segment_ids)},
      {"masked_lm_positions", longs(predictions, &InstanceFeatures::masked_lm_positions)},
      {"masked_lm_ids", longs(predictions, &InstanceFeatures::masked_lm_ids)},
      {"masked_lm_weights", weights.to(device)},
      {"next_sentence_labels", longs(1, &InstanceFeatures::next_sentence_labels).reshape({-1})}};
}

}  // namespace bertlab::pretrain
