#pragma once
// The classifier task: Google's run_classifier.py as a bertlab Task, over the nine GLUE tasks
// (Hugging Face's names and metrics), XNLI, and the generic tsv/jsonl formats.

#include <bertlab/task.h>

#include <memory>
#include <string>
#include <vector>

#include "input_features.h"
#include "options.h"
#include "processors.h"

namespace bertlab::classifier {

class ClassifierModelImpl;

class ClassifierTask : public Task {
 public:
  /// Throws ConfigError for an unknown task_name.
  explicit ClassifierTask(ClassifierOptions options);

  void prepare(const TaskContext& ctx) override;
  int64_t num_train_examples() const override;
  std::shared_ptr<torch::nn::Module> create_model(const BertConfig& config,
                                                  bool sparse_embeddings) const override;
  Batch make_train_batch(const std::vector<int64_t>& indices,
                         const c10::Device& device) const override;
  LossOutput compute_loss(torch::nn::Module& model, const Batch& batch) const override;
  /// Metrics of each evaluation set, keys suffixed by the set's suffix ("_mm" for MNLI's
  /// mismatched dev set). Classification: eval_accuracy, eval_loss (mean per-example
  /// cross-entropy), then eval_f1 and eval_combined_score (mrpc, qqp, two-label generic) or
  /// eval_matthews_correlation (cola). Regression: eval_loss (mean squared error), eval_pearson,
  /// eval_spearmanr, eval_combined_score (their mean). Restores the model's training mode.
  Metrics evaluate(torch::nn::Module& model, const EvalContext& ctx) const override;
  /// BertForSequenceClassification: the labels (none for regression) and the problem type.
  HfModelHead hf_model_head() const override;
  /// Classification: the most frequent training label (the lowest id among ties) answered for
  /// every example of each evaluation set, scored as evaluate() scores (no eval_loss). None for
  /// regression.
  FloorMetrics floor_metrics() const override;

  const ClassifierOptions& options() const { return options_; }
  const std::vector<std::string>& labels() const { return labels_; }
  const std::vector<InputFeatures>& train_features() const { return train_features_; }
  /// The first evaluation set (dev, dev_matched, or the training examples).
  const std::vector<InputFeatures>& eval_features() const { return eval_sets_.at(0).features; }
  /// Number of evaluation sets (2 for MNLI's dev_matched and dev_mismatched).
  size_t num_eval_sets() const { return eval_sets_.size(); }
  bool is_regression() const { return labels_.empty(); }

 private:
  ClassifierOptions options_;
  std::unique_ptr<DataProcessor> processor_;
  std::vector<std::string> labels_;            // [label id]
  std::vector<InputFeatures> train_features_;  // [train example], file order
  struct EvalFeatures {
    std::string suffix;                   // appended to each metric key
    std::vector<InputFeatures> features;  // [eval example], file order
  };
  std::vector<EvalFeatures> eval_sets_;  // [eval set]

  /// The metrics of one evaluation set, keys without the suffix; its logits go to
  /// ctx.output_dir/eval_logits<suffix>.tsv.
  Metrics evaluate_set(ClassifierModelImpl& model, const EvalFeatures& set,
                       const EvalContext& ctx) const;
  /// eval_accuracy, then eval_f1 and eval_combined_score or eval_matthews_correlation as the
  /// task's metric set has them.
  Metrics classification_metrics(const std::vector<int64_t>& predictions,
                                 const std::vector<int64_t>& label_ids) const;
};

}  // namespace bertlab::classifier
