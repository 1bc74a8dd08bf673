#pragma once
// The GLUE/XNLI data processors of Google's run_classifier.py: which files a task reads, which
// columns hold the texts and the label, how example ids (guids) are formed, and the label list.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace bertlab::classifier {

/// One labelled example, as run_classifier.py's InputExample.
struct InputExample {
  std::string guid;    ///< "<set>-<row index>" (or "<set>-<pairID>" for MNLI)
  std::string text_a;  ///< untokenized first sequence
  std::string text_b;  ///< untokenized second sequence; empty for single-sequence tasks
  std::string label;   ///< one of the processor's labels()
};

/// Reads one task's train and dev files from a data folder.
class DataProcessor {
 public:
  virtual ~DataProcessor() = default;
  /// The task name ("mrpc", ...).
  virtual std::string name() const = 0;
  virtual std::vector<InputExample> train_examples(const std::filesystem::path& data_dir) const = 0;
  virtual std::vector<InputExample> dev_examples(const std::filesystem::path& data_dir) const = 0;
  /// The label strings; a label's id is its index here.
  virtual std::vector<std::string> labels() const = 0;
};

/// "mrpc", "cola", "mnli", "xnli".
std::vector<std::string> supported_task_names();

/// The processor of `task_name` (one of supported_task_names()); throws ConfigError otherwise.
std::unique_ptr<DataProcessor> make_processor(const std::string& task_name);

}  // namespace bertlab::classifier
