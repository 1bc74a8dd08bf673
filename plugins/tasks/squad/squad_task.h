#pragma once
// The SQuAD task: Google's run_squad.py (v1.1 and v2.0) as a bertlab Task, scored with the
// official evaluation scripts' metrics.

#include <bertlab/task.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "squad_data.h"
#include "squad_features.h"
#include "squad_options.h"

namespace bertlab::squad {

class SquadTask : public Task {
 public:
  explicit SquadTask(SquadOptions options) : options_(std::move(options)) {}

  /// Reads and featurizes train_file (training) and predict_file (prediction), either may be
  /// absent but not both. Throws ConfigError for lengths the model cannot take.
  void prepare(const TaskContext& ctx) override;
  /// Training features (windows), which the batches index into.
  int64_t num_train_examples() const override;
  std::shared_ptr<torch::nn::Module> create_model(const BertConfig& config,
                                                  bool sparse_embeddings) const override;
  /// input_ids, input_mask, segment_ids, start_positions, end_positions.
  Batch make_train_batch(const std::vector<int64_t>& indices,
                         const c10::Device& device) const override;
  LossOutput compute_loss(torch::nn::Module& model, const Batch& batch) const override;
  /// Predicts predict_file, writes predictions.json, nbest_predictions.json and (v2)
  /// null_odds.json into ctx.output_dir, and returns the official metrics: exact_match and f1
  /// (v1.1), or exact, f1, total, HasAns_*, NoAns_*, best_* (v2.0). Restores the model's mode.
  Metrics evaluate(torch::nn::Module& model, const EvalContext& ctx) const override;
  HfModelHead hf_model_head() const override { return {"BertForQuestionAnswering", {}, {}}; }

  const std::vector<SquadFeature>& train_features() const { return train_features_; }
  const std::vector<SquadExample>& eval_examples() const { return eval_examples_; }
  const std::vector<SquadFeature>& eval_features() const { return eval_features_; }

 private:
  SquadOptions options_;
  bool do_lower_case_ = true;
  std::vector<SquadFeature> train_features_;  // [train feature]
  std::vector<SquadExample> eval_examples_;   // [eval example], file order
  std::vector<SquadFeature> eval_features_;   // [eval feature]
  nlohmann::json eval_data_;                  // predict_file's "data", only the questions used
  bool eval_is_v2_ = false;                   // predict_file is a SQuAD 2.0 file
};

}  // namespace bertlab::squad
