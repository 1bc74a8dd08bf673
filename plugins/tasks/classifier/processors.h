#pragma once
// The data processors: which files a task reads, which columns hold the texts and the label,
// how example ids (guids) are formed, the label list, and how the task is scored. The GLUE
// tasks follow Hugging Face's glue processors (and, for mrpc, cola, mnli and xnli, Google's
// run_classifier.py, which they agree with); tsv and jsonl read the columns an experiment names.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace bertlab::classifier {

/// One labelled example, as run_classifier.py's InputExample.
struct InputExample {
  std::string guid;    ///< "<set>-<row index>" (or "<set>-<index column>" where a file has one)
  std::string text_a;  ///< untokenized first sequence
  std::string text_b;  ///< untokenized second sequence; empty for single-sequence tasks
  std::string label;   ///< one of the processor's labels(), or a number for regression tasks
};

/// One evaluation set and the suffix of its metric keys.
struct EvalSet {
  std::string suffix;  ///< "" for dev (dev_matched), "_mm" for MNLI's dev_mismatched (run_glue.py)
  std::vector<InputExample> examples;  ///< file order
};

/// Which metrics evaluate() reports, as Hugging Face's glue_compute_metrics.
enum class MetricSet {
  kAccuracy,         ///< eval_accuracy
  kAccuracyAndF1,    ///< eval_accuracy, eval_f1 (label id 1 positive), eval_combined_score
  kMatthews,         ///< eval_accuracy, eval_matthews_correlation
  kPearsonSpearman,  ///< eval_pearson, eval_spearmanr, eval_combined_score (regression)
};

/// Reads one task's train and dev files from a data folder.
class DataProcessor {
 public:
  virtual ~DataProcessor() = default;
  /// The canonical task name ("mrpc", "stsb", ...).
  virtual std::string name() const = 0;
  virtual std::vector<InputExample> train_examples(const std::filesystem::path& data_dir) const = 0;
  /// The (first) evaluation set: dev.tsv, or dev_matched.tsv for MNLI.
  virtual std::vector<InputExample> dev_examples(const std::filesystem::path& data_dir) const = 0;
  /// Every evaluation set with its key suffix; by default the dev set alone.
  virtual std::vector<EvalSet> eval_sets(const std::filesystem::path& data_dir) const;
  /// The label strings; a label's id is its index here. Empty for a regression task.
  virtual std::vector<std::string> labels() const = 0;
  virtual MetricSet metric_set() const = 0;
  bool is_regression() const { return labels().empty(); }
};

/// Every accepted task_name: the GLUE tasks by Hugging Face's names, their aliases (sst-2,
/// sts-b), xnli, and the generic formats tsv and jsonl.
std::vector<std::string> supported_task_names();

/// The canonical name of `task_name`: "sst-2" → "sst2", "sts-b" → "stsb", others unchanged.
std::string canonical_task_name(const std::string& task_name);

/// The processor of `options.task_name` (generic formats read `options.generic`); throws
/// ConfigError for an unknown name.
std::unique_ptr<DataProcessor> make_processor(const ClassifierOptions& options);

/// The processor of a GLUE or XNLI task (not tsv/jsonl, which need their options).
std::unique_ptr<DataProcessor> make_processor(const std::string& task_name);

/// A regression label: the whole of `text` as a finite decimal number, or nothing.
std::optional<double> parse_score(const std::string& text);

}  // namespace bertlab::classifier
