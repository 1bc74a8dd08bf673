#include "processors.h"

#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "generic_processor.h"
#include "trec.h"
#include "tsv_reader.h"

namespace bertlab::classifier {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kBinaryLabels = {"0", "1"};
const std::vector<std::string> kNliLabels = {"contradiction", "entailment", "neutral"};
const std::vector<std::string> kEntailmentLabels = {"entailment", "not_entailment"};

constexpr int kLastColumn = -1;  // the label is the row's last field (Python's line[-1])
constexpr int kNoColumn = -2;    // no second text / guid from the row index

/// Throws DataError unless `row` has at least `needed` fields; `layout` names the columns.
void require_columns(const fs::path& file, const TsvRow& row, size_t needed,
                     const std::string& layout) {
  BERTLAB_CHECK_AS(DataError, row.fields.size() >= needed,
                   "{}:{}: expected at least {} tab-separated columns ({}), found {}",
                   file.string(), row.line, needed, layout, row.fields.size());
}

/// Throws DataError unless `label` is one of `labels`.
void require_label(const fs::path& file, const TsvRow& row, const std::string& label, size_t column,
                   const std::vector<std::string>& labels) {
  BERTLAB_CHECK_AS(DataError, std::find(labels.begin(), labels.end(), label) != labels.end(),
                   "{}:{}: unknown label \"{}\" in column {} (1-based); expected one of {}",
                   file.string(), row.line, label, column + 1, fmt::join(labels, "|"));
}

/// Throws DataError unless `score` is a number (STS-B's similarity score).
void require_score(const fs::path& file, const TsvRow& row, const std::string& score,
                   size_t column) {
  BERTLAB_CHECK_AS(DataError, parse_score(score).has_value(),
                   "{}:{}: score \"{}\" in column {} (1-based) is not a number; expected a "
                   "decimal such as 3.8",
                   file.string(), row.line, score, column + 1);
}

/// Google's guid "<set>-<i>", i the row's 0-based index in the file (header included).
std::string row_guid(const std::string& set, const TsvRow& row) {
  return fmt::format("{}-{}", set, row.line - 1);
}

/// Where one GLUE task's columns are: indices into the row's fields.
struct TsvLayout {
  std::string name;                 ///< canonical task name
  bool header = true;               ///< skip the first row
  int text_a = 0;                   ///< column of text_a
  int text_b = kNoColumn;           ///< column of text_b, or kNoColumn
  int label = kLastColumn;          ///< column of the label, or kLastColumn
  int guid = kNoColumn;             ///< column of the guid's id, or kNoColumn: the row index
  size_t min_columns = 0;           ///< fewer is an error
  std::string columns;              ///< the layout in words, for messages
  std::vector<std::string> labels;  ///< empty: regression (the label is a number)
  MetricSet metrics = MetricSet::kAccuracy;
};

/// A GLUE task read from train.tsv and dev.tsv by a TsvLayout, as Hugging Face's processors.
class GlueProcessor : public DataProcessor {
 public:
  explicit GlueProcessor(TsvLayout layout) : layout_(std::move(layout)) {}
  std::string name() const override { return layout_.name; }
  std::vector<InputExample> train_examples(const fs::path& dir) const override {
    return read(dir / "train.tsv", "train");
  }
  std::vector<InputExample> dev_examples(const fs::path& dir) const override {
    return read(dir / "dev.tsv", "dev");
  }
  std::vector<std::string> labels() const override { return layout_.labels; }
  MetricSet metric_set() const override { return layout_.metrics; }

 protected:
  std::vector<InputExample> read(const fs::path& file, const std::string& set) const {
    const std::vector<TsvRow> rows = read_tsv(file);
    std::vector<InputExample> examples;
    for (size_t i = layout_.header ? 1 : 0; i < rows.size(); ++i) {
      examples.push_back(example(file, set, rows[i]));
    }
    return examples;
  }

 private:
  InputExample example(const fs::path& file, const std::string& set, const TsvRow& row) const {
    require_columns(file, row, layout_.min_columns, layout_.columns);
    const auto at = [&](int column) -> const std::string& {
      return row.fields[column == kLastColumn ? row.fields.size() - 1 : column];
    };
    const size_t label_column =
        layout_.label == kLastColumn ? row.fields.size() - 1 : layout_.label;
    if (layout_.labels.empty()) {
      require_score(file, row, at(layout_.label), label_column);
    } else {
      require_label(file, row, at(layout_.label), label_column, layout_.labels);
    }
    InputExample e;
    e.guid = layout_.guid == kNoColumn ? row_guid(set, row)
                                       : fmt::format("{}-{}", set, at(layout_.guid));
    e.text_a = at(layout_.text_a);
    if (layout_.text_b != kNoColumn) e.text_b = at(layout_.text_b);
    e.label = at(layout_.label);
    return e;
  }

  TsvLayout layout_;
};

// MNLI evaluates on dev_matched.tsv and dev_mismatched.tsv (run_glue.py's "_mm" keys).
class MnliProcessor : public GlueProcessor {
 public:
  using GlueProcessor::GlueProcessor;
  std::vector<InputExample> dev_examples(const fs::path& dir) const override {
    return read(dir / "dev_matched.tsv", "dev_matched");
  }
  std::vector<EvalSet> eval_sets(const fs::path& dir) const override {
    return {{"", dev_examples(dir)}, {"_mm", read(dir / "dev_mismatched.tsv", "dev_mismatched")}};
  }
};

// The layouts of the GLUE files (the column numbers below are 0-based).
TsvLayout mrpc_layout() {
  // run_classifier.py's MrpcProcessor: Quality, #1 ID, #2 ID, #1 String, #2 String.
  return {"mrpc",
          true,
          3,
          4,
          0,
          kNoColumn,
          5,
          "Quality, #1 ID, #2 ID, #1 String, #2 String",
          kBinaryLabels,
          MetricSet::kAccuracyAndF1};
}
TsvLayout cola_layout() {
  // No header in train/dev: source, label, original label, sentence.
  return {"cola",
          false,
          3,
          kNoColumn,
          1,
          kNoColumn,
          4,
          "source, label, original label, sentence",
          kBinaryLabels,
          MetricSet::kMatthews};
}
TsvLayout sst2_layout() {
  // Header "sentence \t label".
  return {"sst2",
          true,
          0,
          kNoColumn,
          1,
          kNoColumn,
          2,
          "sentence, label",
          kBinaryLabels,
          MetricSet::kAccuracy};
}
TsvLayout stsb_layout() {
  // index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score.
  // The score is the last column (train.tsv and dev.tsv both end with it).
  return {"stsb",
          true,
          7,
          8,
          kLastColumn,
          0,
          10,
          "index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, "
          "score",
          {},
          MetricSet::kPearsonSpearman};
}
TsvLayout qqp_layout() {
  // id, qid1, qid2, question1, question2, is_duplicate. Hugging Face skips rows too short for
  // these columns; here they are an error like in every other task.
  return {"qqp",
          true,
          3,
          4,
          5,
          0,
          6,
          "id, qid1, qid2, question1, question2, is_duplicate",
          kBinaryLabels,
          MetricSet::kAccuracyAndF1};
}
TsvLayout mnli_layout() {
  // index, promptID, pairID, genre, 4 parses, sentence1 (8), sentence2 (9), label1..5,
  // gold_label (last). A row of exactly ten columns would take sentence2 as the label, so
  // require one more.
  return {"mnli",      true,
          8,           9,
          kLastColumn, 0,
          11,          "index, ..., sentence1 (9th), sentence2 (10th), ..., gold_label (last)",
          kNliLabels,  MetricSet::kAccuracy};
}
TsvLayout pair_layout(const std::string& name, const std::string& columns,
                      std::vector<std::string> labels) {
  // QNLI (index, question, sentence, label), RTE and WNLI (index, sentence1, sentence2, label).
  return {name, true, 1, 2, kLastColumn, 0, 4, columns, std::move(labels), MetricSet::kAccuracy};
}

// XnliProcessor: trains on the machine-translated MultiNLI of one language
// (multinli/multinli.train.<lang>.tsv: premise \t hypo \t label, "contradictory" meaning
// "contradiction") and evaluates on the rows of xnli.dev.tsv in that language
// (language \t gold_label \t ... \t sentence1 (7th) \t sentence2 (8th) \t ...).
class XnliProcessor : public DataProcessor {
 public:
  std::string name() const override { return "xnli"; }
  std::vector<InputExample> train_examples(const fs::path& dir) const override {
    const fs::path file = dir / "multinli" / fmt::format("multinli.train.{}.tsv", kLanguage);
    const std::vector<TsvRow> rows = read_tsv(file);
    std::vector<InputExample> examples;
    for (size_t i = 1; i < rows.size(); ++i) {
      const TsvRow& row = rows[i];
      require_columns(file, row, 3, "premise, hypo, label");
      std::string label = row.fields[2];
      if (label == "contradictory") label = "contradiction";
      require_label(file, row, label, 2, kNliLabels);
      examples.push_back({row_guid("train", row), row.fields[0], row.fields[1], label});
    }
    return examples;
  }
  std::vector<InputExample> dev_examples(const fs::path& dir) const override {
    const fs::path file = dir / "xnli.dev.tsv";
    const std::vector<TsvRow> rows = read_tsv(file);
    std::vector<InputExample> examples;
    for (size_t i = 1; i < rows.size(); ++i) {
      const TsvRow& row = rows[i];
      require_columns(file, row, 1, "language first");
      // Google filters on the language before reading any other column, and the guid keeps
      // the row index over all languages.
      if (row.fields[0] != kLanguage) continue;
      require_columns(file, row, 8,
                      "language, gold_label, ..., sentence1 (7th), sentence2 (8th), ...");
      require_label(file, row, row.fields[1], 1, kNliLabels);
      examples.push_back({row_guid("dev", row), row.fields[6], row.fields[7], row.fields[1]});
    }
    return examples;
  }
  std::vector<std::string> labels() const override { return kNliLabels; }
  MetricSet metric_set() const override { return MetricSet::kAccuracy; }

 private:
  static constexpr const char* kLanguage = "zh";  // fixed in Google's XnliProcessor
};

}  // namespace

std::vector<EvalSet> DataProcessor::eval_sets(const fs::path& data_dir) const {
  return {{"", dev_examples(data_dir)}};
}

std::vector<std::string> supported_task_names() {
  return {"cola", "sst2", "sst-2", "mrpc", "stsb", "sts-b", "qqp",  "mnli",
          "qnli", "rte",  "wnli",  "xnli", "trec", "tsv",   "jsonl"};
}

std::string canonical_task_name(const std::string& task_name) {
  if (task_name == "sst-2") return "sst2";
  if (task_name == "sts-b") return "stsb";
  return task_name;
}

std::unique_ptr<DataProcessor> make_processor(const std::string& task_name) {
  const std::string name = canonical_task_name(task_name);
  if (name == "mrpc") return std::make_unique<GlueProcessor>(mrpc_layout());
  if (name == "cola") return std::make_unique<GlueProcessor>(cola_layout());
  if (name == "sst2") return std::make_unique<GlueProcessor>(sst2_layout());
  if (name == "stsb") return std::make_unique<GlueProcessor>(stsb_layout());
  if (name == "qqp") return std::make_unique<GlueProcessor>(qqp_layout());
  if (name == "mnli") return std::make_unique<MnliProcessor>(mnli_layout());
  if (name == "qnli") {
    return std::make_unique<GlueProcessor>(
        pair_layout("qnli", "index, question, sentence, label", kEntailmentLabels));
  }
  if (name == "rte") {
    return std::make_unique<GlueProcessor>(
        pair_layout("rte", "index, sentence1, sentence2, label", kEntailmentLabels));
  }
  if (name == "wnli") {
    return std::make_unique<GlueProcessor>(
        pair_layout("wnli", "index, sentence1, sentence2, label", kBinaryLabels));
  }
  if (name == "xnli") return std::make_unique<XnliProcessor>();
  if (name == "trec") return make_trec_processor(/*fine=*/false);
  BERTLAB_CHECK_AS(ConfigError, !is_generic_format(name),
                   "task_name: \"{}\" reads the files and columns of the generic-format keys; "
                   "make its processor from the task options",
                   name);
  throw ConfigError(fmt::format("task_name: unknown task \"{}\"; supported tasks are {}", task_name,
                                fmt::join(supported_task_names(), "|")));
}

std::unique_ptr<DataProcessor> make_processor(const ClassifierOptions& options) {
  if (is_generic_format(options.task_name)) {
    return std::make_unique<GenericProcessor>(options.task_name, options.generic);
  }
  if (options.task_name == "trec") return make_trec_processor(options.trec_fine);
  return make_processor(options.task_name);
}

std::optional<double> parse_score(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front())) != 0) {
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace bertlab::classifier
