#include "processors.h"

#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tsv_reader.h"

namespace bertlab::classifier {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kBinaryLabels = {"0", "1"};
const std::vector<std::string> kNliLabels = {"contradiction", "entailment", "neutral"};

/// Throws DataError unless `row` has at least `needed` fields; `layout` names the columns.
void require_columns(const fs::path& file, const TsvRow& row, size_t needed, const char* layout) {
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

/// Google's guid "<set>-<i>", i the row's 0-based index in the file (header included).
std::string row_guid(const char* set, const TsvRow& row) {
  return fmt::format("{}-{}", set, row.line - 1);
}

// run_classifier.py's MrpcProcessor: a header row, then
// Quality \t #1 ID \t #2 ID \t #1 String \t #2 String; the label is Quality.
class MrpcProcessor : public DataProcessor {
 public:
  std::string name() const override { return "mrpc"; }
  std::vector<InputExample> train_examples(const fs::path& dir) const override {
    return read(dir / "train.tsv", "train");
  }
  std::vector<InputExample> dev_examples(const fs::path& dir) const override {
    return read(dir / "dev.tsv", "dev");
  }
  std::vector<std::string> labels() const override { return kBinaryLabels; }

 private:
  static std::vector<InputExample> read(const fs::path& file, const char* set) {
    const std::vector<TsvRow> rows = read_tsv(file);
    std::vector<InputExample> examples;
    for (size_t i = 1; i < rows.size(); ++i) {  // row 0 is the header
      const TsvRow& row = rows[i];
      require_columns(file, row, 5, "Quality, #1 ID, #2 ID, #1 String, #2 String");
      require_label(file, row, row.fields[0], 0, kBinaryLabels);
      examples.push_back({row_guid(set, row), row.fields[3], row.fields[4], row.fields[0]});
    }
    return examples;
  }
};

// ColaProcessor: no header in train/dev; source \t label \t original label \t sentence.
class ColaProcessor : public DataProcessor {
 public:
  std::string name() const override { return "cola"; }
  std::vector<InputExample> train_examples(const fs::path& dir) const override {
    return read(dir / "train.tsv", "train");
  }
  std::vector<InputExample> dev_examples(const fs::path& dir) const override {
    return read(dir / "dev.tsv", "dev");
  }
  std::vector<std::string> labels() const override { return kBinaryLabels; }

 private:
  static std::vector<InputExample> read(const fs::path& file, const char* set) {
    const std::vector<TsvRow> rows = read_tsv(file);
    std::vector<InputExample> examples;
    for (const TsvRow& row : rows) {
      require_columns(file, row, 4, "source, label, original label, sentence");
      require_label(file, row, row.fields[1], 1, kBinaryLabels);
      examples.push_back({row_guid(set, row), row.fields[3], "", row.fields[1]});
    }
    return examples;
  }
};

// MnliProcessor: a header row; column 0 is the index used in the guid, columns 8 and 9 the
// sentences, the last column the gold label. Dev is dev_matched.tsv.
class MnliProcessor : public DataProcessor {
 public:
  std::string name() const override { return "mnli"; }
  std::vector<InputExample> train_examples(const fs::path& dir) const override {
    return read(dir / "train.tsv", "train");
  }
  std::vector<InputExample> dev_examples(const fs::path& dir) const override {
    return read(dir / "dev_matched.tsv", "dev_matched");
  }
  std::vector<std::string> labels() const override { return kNliLabels; }

 private:
  static std::vector<InputExample> read(const fs::path& file, const char* set) {
    const std::vector<TsvRow> rows = read_tsv(file);
    std::vector<InputExample> examples;
    for (size_t i = 1; i < rows.size(); ++i) {
      const TsvRow& row = rows[i];
      // Google needs columns 0..9 and takes the label from the last one; a row of exactly
      // ten columns would use sentence2 as the label, so require one more.
      require_columns(file, row, 11,
                      "index, ..., sentence1 (9th), sentence2 (10th), ..., gold_label (last)");
      const size_t label_column = row.fields.size() - 1;
      require_label(file, row, row.fields[label_column], label_column, kNliLabels);
      examples.push_back({fmt::format("{}-{}", set, row.fields[0]), row.fields[8], row.fields[9],
                          row.fields[label_column]});
    }
    return examples;
  }
};

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

 private:
  static constexpr const char* kLanguage = "zh";  // fixed in Google's XnliProcessor
};

}  // namespace

std::vector<std::string> supported_task_names() { return {"mrpc", "cola", "mnli", "xnli"}; }

std::unique_ptr<DataProcessor> make_processor(const std::string& task_name) {
  if (task_name == "mrpc") return std::make_unique<MrpcProcessor>();
  if (task_name == "cola") return std::make_unique<ColaProcessor>();
  if (task_name == "mnli") return std::make_unique<MnliProcessor>();
  if (task_name == "xnli") return std::make_unique<XnliProcessor>();
  throw ConfigError(fmt::format("task_name: unknown task \"{}\"; supported tasks are {}", task_name,
                                fmt::join(supported_task_names(), "|")));
}

}  // namespace bertlab::classifier
