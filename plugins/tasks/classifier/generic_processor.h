#pragma once
// task_name = "tsv" | "jsonl": examples from files and columns the experiment names.

#include <filesystem>
#include <string>
#include <vector>

#include "options.h"
#include "processors.h"

namespace bertlab::classifier {

/// Reads train_file and dev_file under data_dir. TSV files are split as Google's reader does
/// (tsv_reader.h); a column is a header name (header = true) or a 0-based index. A JSONL file
/// holds one JSON object per line (blank lines are skipped); a column is a key whose value is a
/// string (texts), a string or integer (labels) or a number or numeric string (regression).
class GenericProcessor : public DataProcessor {
 public:
  /// `format`: "tsv" or "jsonl".
  GenericProcessor(std::string format, GenericFormatOptions options);

  std::string name() const override { return format_; }
  std::vector<InputExample> train_examples(const std::filesystem::path& data_dir) const override;
  std::vector<InputExample> dev_examples(const std::filesystem::path& data_dir) const override;
  std::vector<std::string> labels() const override { return options_.label_list; }
  /// Regression: Pearson and Spearman; two labels: accuracy and F1 of the second label;
  /// otherwise accuracy.
  MetricSet metric_set() const override;

 private:
  std::vector<InputExample> read(const std::filesystem::path& file, const std::string& set) const;
  std::vector<InputExample> read_tsv_file(const std::filesystem::path& file,
                                          const std::string& set) const;
  std::vector<InputExample> read_jsonl_file(const std::filesystem::path& file,
                                            const std::string& set) const;
  /// Throws DataError naming `where` unless `label` fits the task (a listed label or a number).
  void check_label(const std::string& where, const std::string& column,
                   const std::string& label) const;

  std::string format_;
  GenericFormatOptions options_;
};

}  // namespace bertlab::classifier
