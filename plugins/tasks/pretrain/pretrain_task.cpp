// run_pretraining.py as a bertlab Task.

#include "pretrain_task.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/log.h>
#include <bertlab/model/bert.h>
#include <bertlab/task_helpers.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "instance_stream.h"
#include "pretrain_model.h"
#include "tf_example.h"

namespace bertlab::pretrain {

namespace fs = std::filesystem;

std::vector<OptionDecl> pretrain_option_decls() {
  return {
      path_option("input_file",
                  "instances from `bertlab pretrain create-data` (NAME.jsonl or a TFRecord); "
                  "required when [train] do_train or do_eval")
          .mark_required(),
      path_option("eval_file", "instances to evaluate; empty: input_file (as run_pretraining.py)"),
      int_option("max_seq_length", 128, "the instances' length (run_pretraining.py's flag)")
          .in_range(5, 512),
      int_option("max_predictions_per_seq", 20, "the instances' masked-LM slots").at_least(1),
      int_option("max_eval_steps", 100, "evaluation batches at most").at_least(1),
      bool_option("streaming", false,
                  "read input_file in order on a background thread instead of into memory "
                  "(files larger than memory); needs train.num_train_steps"),
      int_option("prefetch_batches", 8, "streaming: micro-batches read ahead at most").at_least(1),
      bool_option("next_sentence", true,
                  "train the next-sentence head (Google's BERT); false: masked LM alone, no "
                  "cls.seq_relationship (RoBERTa, run_mlm.py; exported as BertForMaskedLM); "
                  "reads either kind of instances"),
  };
}

PretrainOptions PretrainOptions::from_config(const ConfigView& view) {
  PretrainOptions o;
  o.input_file = view.get_path("input_file");
  o.eval_file = view.get_path("eval_file");
  o.max_seq_length = view.get_int("max_seq_length");
  o.max_predictions_per_seq = view.get_int("max_predictions_per_seq");
  o.max_eval_steps = view.get_int("max_eval_steps");
  o.streaming = view.get_bool("streaming");
  o.prefetch_batches = view.get_int("prefetch_batches");
  o.next_sentence = view.get_bool("next_sentence");
  return o;
}

namespace {

PretrainModelImpl& pretrain_model(torch::nn::Module& model) {
  auto* m = dynamic_cast<PretrainModelImpl*>(&model);
  BERTLAB_CHECK(m != nullptr, "the pretrain task got a model it did not create");
  return *m;
}

PretrainLosses forward_losses(PretrainModelImpl& model, const Batch& batch) {
  const PretrainLogits logits =
      model.forward(batch_tensor(batch, "input_ids"), batch_tensor(batch, "segment_ids"),
                    batch_tensor(batch, "input_mask"), batch_tensor(batch, "masked_lm_positions"));
  return pretrain_losses(logits, batch_tensor(batch, "masked_lm_ids"),
                         batch_tensor(batch, "masked_lm_weights"),
                         batch_tensor(batch, "next_sentence_labels"));
}

}  // namespace

void PretrainTask::prepare(const TaskContext& ctx) {
  BERTLAB_CHECK_AS(ConfigError, ctx.bert_config != nullptr, "the pretrain task needs [model]");
  const int64_t positions = ctx.bert_config->max_position_embeddings;
  if (options_.max_seq_length > positions) {
    throw ConfigError(
        fmt::format("task.max_seq_length ({}) exceeds the model's max_position_embeddings ({})",
                    options_.max_seq_length, positions));
  }
  vocab_size_ = ctx.bert_config->vocab_size;
  if (options_.streaming) {
    // Only the first instance now, so that a wrong file fails before any work.
    check_sentence_pairs(read_instances(options_.input_file, shape(), 1).front());
    log_info("data", "pretrain: streaming training instances from {} ({} micro-batches ahead)",
             options_.input_file.string(), options_.prefetch_batches);
    return;
  }
  train_ = read_instances(options_.input_file, shape());
  check_sentence_pairs(train_.front());
  eval_ = options_.eval_file.empty() ? train_ : read_instances(options_.eval_file, shape());
  log_info("data", "pretrain: {} training instances from {}, {} to evaluate", train_.size(),
           options_.input_file.string(), eval_.size());
}

void PretrainTask::check_sentence_pairs(const InstanceFeatures& first) const {
  // Google's instances always have both segments (A and B are never empty), so one without a
  // segment id 1 comes from create-data --next_sentence=false: all labels 0, nothing to learn.
  const auto& segments = first.segment_ids;
  if (!options_.next_sentence || std::count(segments.begin(), segments.end(), 1) > 0) return;
  throw ConfigError(fmt::format(
      "task.next_sentence = true, but the first instance of {} is a single segment (no segment "
      "id 1), as `bertlab pretrain create-data --next_sentence=false` writes: its next-sentence "
      "labels are all 0. Set task.next_sentence = false to train the masked LM alone, or make "
      "the data without --next_sentence=false",
      options_.input_file.string()));
}

InstanceShape PretrainTask::shape() const {
  return InstanceShape{options_.max_seq_length, options_.max_predictions_per_seq, vocab_size_};
}

std::unique_ptr<TrainStream> PretrainTask::open_train_stream(const StreamShard& shard,
                                                             const std::string& position) const {
  const StreamPosition start =
      position.empty() ? StreamPosition{}
                       : StreamPosition::from_text(position, "the checkpoint's data_position");
  return std::make_unique<InstanceStream>(options_.input_file, shape(), shard, start,
                                          options_.prefetch_batches);
}

int64_t PretrainTask::num_train_examples() const { return static_cast<int64_t>(train_.size()); }

std::shared_ptr<torch::nn::Module> PretrainTask::create_model(const BertConfig& config,
                                                              bool sparse_embeddings) const {
  return PretrainModel(config, sparse_embeddings, options_.next_sentence).ptr();
}

Batch PretrainTask::make_train_batch(const std::vector<int64_t>& indices,
                                     const c10::Device& device) const {
  return collate(train_, indices, device);
}

LossOutput PretrainTask::compute_loss(torch::nn::Module& model, const Batch& batch) const {
  const PretrainLosses losses = forward_losses(pretrain_model(model), batch);
  LossOutput out;
  out.loss = losses.next_sentence_mean;
  out.weighted_loss_sum = losses.masked_lm_sum;
  out.num_examples = batch_tensor(batch, "input_ids").size(0);
  return out;
}

double PretrainTask::loss_weight(const Batch& batch) const {
  return batch_tensor(batch, "masked_lm_weights").sum().item<double>();
}

Metrics PretrainTask::evaluate(torch::nn::Module& model, const EvalContext& ctx) const {
  PretrainModelImpl& m = pretrain_model(model);
  const EvalModeScope eval_mode(m);
  const at::NoGradGuard no_grad;
  PretrainMetrics metrics;
  // Streaming: the first max_eval_steps batches of eval_file (or input_file), read now.
  std::vector<InstanceFeatures> streamed;
  if (options_.streaming) {
    streamed = read_instances(options_.eval_file.empty() ? options_.input_file : options_.eval_file,
                              shape(), options_.max_eval_steps * ctx.eval_batch_size);
  }
  const std::vector<InstanceFeatures>& eval = options_.streaming ? streamed : eval_;
  const auto total = static_cast<int64_t>(eval.size());
  int64_t batches = 0;
  for (int64_t start = 0; start < total && batches < options_.max_eval_steps;
       start += ctx.eval_batch_size, ++batches) {
    std::vector<int64_t> indices;
    for (int64_t i = start; i < std::min(total, start + ctx.eval_batch_size); ++i) {
      indices.push_back(i);
    }
    const Batch batch = collate(eval, indices, ctx.device);
    const PretrainLogits logits =
        m.forward(batch_tensor(batch, "input_ids"), batch_tensor(batch, "segment_ids"),
                  batch_tensor(batch, "input_mask"), batch_tensor(batch, "masked_lm_positions"));
    const PretrainLosses losses = pretrain_losses(logits, batch_tensor(batch, "masked_lm_ids"),
                                                  batch_tensor(batch, "masked_lm_weights"),
                                                  batch_tensor(batch, "next_sentence_labels"));
    metrics.add(logits, losses, batch_tensor(batch, "masked_lm_ids"),
                batch_tensor(batch, "masked_lm_weights"),
                batch_tensor(batch, "next_sentence_labels"));
  }
  if (!options_.next_sentence) {
    return {{"masked_lm_accuracy", metrics.masked_lm_accuracy()},
            {"masked_lm_loss", metrics.masked_lm_loss()},
            {"loss", metrics.masked_lm_loss()}};
  }
  return {{"masked_lm_accuracy", metrics.masked_lm_accuracy()},
          {"masked_lm_loss", metrics.masked_lm_loss()},
          {"next_sentence_accuracy", metrics.next_sentence_accuracy()},
          {"next_sentence_loss", metrics.next_sentence_loss()},
          {"loss", metrics.masked_lm_loss() + metrics.next_sentence_loss()}};
}

}  // namespace bertlab::pretrain
