#pragma once
// The pretrain task: Google's run_pretraining.py (masked LM + next sentence prediction) on the
// instances `bertlab pretrain create-data` writes (JSON Lines or TFRecord); with next_sentence =
// false the masked LM alone (RoBERTa's objective, Hugging Face's run_mlm.py and BertForMaskedLM).

#include <bertlab/config.h>
#include <bertlab/task.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "create_data.h"
#include "instance_reader.h"

namespace bertlab::pretrain {

struct PretrainOptions {
  std::filesystem::path input_file;      ///< instances for training (.jsonl or TFRecord)
  std::filesystem::path eval_file;       ///< instances to evaluate; empty: input_file (as Google)
  int64_t max_seq_length = 128;          ///< must equal the instances' length
  int64_t max_predictions_per_seq = 20;  ///< must equal the instances' prediction slots
  int64_t max_eval_steps = 100;          ///< evaluation batches at most (Google's default)
  bool streaming = false;                ///< read input_file in order instead of into memory
  int64_t prefetch_batches = 8;          ///< streaming: micro-batches read ahead at most
  bool next_sentence = true;             ///< false: no next-sentence head, masked LM alone

  static PretrainOptions from_config(const ConfigView& view);
};

std::vector<OptionDecl> pretrain_option_decls();

class PretrainTask : public Task {
 public:
  explicit PretrainTask(PretrainOptions options) : options_(std::move(options)) {}

  void prepare(const TaskContext& ctx) override;
  /// The instances in memory; 0 when streaming (their number is not read ahead).
  int64_t num_train_examples() const override;
  std::shared_ptr<torch::nn::Module> create_model(const BertConfig& config,
                                                  bool sparse_embeddings) const override;
  /// input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids,
  /// masked_lm_weights, next_sentence_labels.
  Batch make_train_batch(const std::vector<int64_t>& indices,
                         const c10::Device& device) const override;
  /// loss = next-sentence mean (undefined without the head); weighted_loss_sum =
  /// Σ masked_lm_weights·cross-entropy, which the host divides by the step's masked tokens.
  LossOutput compute_loss(torch::nn::Module& model, const Batch& batch) const override;
  bool token_weighted_loss() const override { return true; }
  bool streams_train_data() const override { return options_.streaming; }
  /// A background reader of input_file from `position` (a StreamPosition's text).
  std::unique_ptr<TrainStream> open_train_stream(const StreamShard& shard,
                                                 const std::string& position) const override;
  /// Σ masked_lm_weights of the batch.
  double loss_weight(const Batch& batch) const override;
  /// Google's metric_fn over at most max_eval_steps batches of eval_file: masked_lm_accuracy,
  /// masked_lm_loss, next_sentence_accuracy, next_sentence_loss, and loss (their sum); without
  /// the next-sentence head masked_lm_accuracy, masked_lm_loss and loss (= masked_lm_loss).
  Metrics evaluate(torch::nn::Module& model, const EvalContext& ctx) const override;
  /// BertForPreTraining, or BertForMaskedLM without the next-sentence head.
  HfModelHead hf_model_head() const override {
    return {options_.next_sentence ? "BertForPreTraining" : "BertForMaskedLM", {}, {}};
  }

 private:
  InstanceShape shape() const;
  /// With the next-sentence head, refuses instances of one segment (create-data
  /// --next_sentence=false), judged by `first`, the first of input_file.
  void check_sentence_pairs(const InstanceFeatures& first) const;

  PretrainOptions options_;
  int64_t vocab_size_ = -1;
  std::vector<InstanceFeatures> train_;  // [instance]
  std::vector<InstanceFeatures> eval_;   // [instance]
};

}  // namespace bertlab::pretrain
