#pragma once
// The classifier task: Google's run_classifier.py (MRPC, CoLA, MNLI, XNLI) as a bertlab Task.

#include <bertlab/task.h>

#include <memory>
#include <string>
#include <vector>

#include "input_features.h"
#include "options.h"
#include "processors.h"

namespace bertlab::classifier {

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
  /// Metrics: eval_accuracy, eval_loss (mean per-example loss), then f1 (mrpc) or mcc (cola).
  /// Restores the model's training mode afterwards.
  Metrics evaluate(torch::nn::Module& model, const EvalContext& ctx) const override;

  const ClassifierOptions& options() const { return options_; }
  const std::vector<std::string>& labels() const { return labels_; }
  const std::vector<InputFeatures>& train_features() const { return train_features_; }
  const std::vector<InputFeatures>& eval_features() const { return eval_features_; }

 private:
  ClassifierOptions options_;
  std::unique_ptr<DataProcessor> processor_;
  std::vector<std::string> labels_;            // [label id]
  std::vector<InputFeatures> train_features_;  // [train example], file order
  std::vector<InputFeatures> eval_features_;   // [eval example], file order
};

}  // namespace bertlab::classifier
