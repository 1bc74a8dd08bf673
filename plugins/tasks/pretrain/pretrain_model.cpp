// run_pretraining.py's heads and losses.

#include "pretrain_model.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace bertlab::pretrain {

PredictionTransformImpl::PredictionTransformImpl(const BertConfig& config)
    : hidden_act(config.hidden_act) {
  dense = register_module(
      "dense", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.hidden_size)));
  LayerNorm = register_module(
      "LayerNorm", torch::nn::LayerNorm(
                       torch::nn::LayerNormOptions({config.hidden_size}).eps(kBertLayerNormEps)));
}

at::Tensor PredictionTransformImpl::forward(const at::Tensor& hidden) {
  return LayerNorm->forward(hidden_activation(hidden_act, dense->forward(hidden)));
}

MaskedLmHeadImpl::MaskedLmHeadImpl(const BertConfig& config) {
  transform = register_module("transform", PredictionTransform(config));
  bias = register_parameter("bias", at::zeros({config.vocab_size}));
}

at::Tensor MaskedLmHeadImpl::forward(const at::Tensor& hidden, const at::Tensor& word_embeddings) {
  return at::matmul(transform->forward(hidden), word_embeddings.t()) + bias;
}

PretrainHeadsImpl::PretrainHeadsImpl(const BertConfig& config, bool next_sentence) {
  predictions = register_module("predictions", MaskedLmHead(config));
  if (next_sentence) {
    seq_relationship = register_module(
        "seq_relationship", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, 2)));
  }
}

PretrainModelImpl::PretrainModelImpl(const BertConfig& config, bool sparse_embeddings,
                                     bool next_sentence) {
  bert = register_module("bert", BertModel(config, sparse_embeddings));
  cls = register_module("cls", PretrainHeads(config, next_sentence));
  init_bert_weights(*bert, config.initializer_range);
  // As Google: the transform and the NSP weights from the truncated normal, biases 0.
  init_bert_weights(*cls, config.initializer_range);
}

PretrainLogits PretrainModelImpl::forward(const at::Tensor& input_ids,
                                          const at::Tensor& segment_ids,
                                          const at::Tensor& input_mask,
                                          const at::Tensor& masked_lm_positions) {
  const BertOutput out = bert->forward(input_ids, segment_ids, input_mask);
  // gather_indexes: the sequence output at each masked position, [batch, predictions, hidden].
  const int64_t hidden = out.sequence_output.size(2);
  const at::Tensor index = masked_lm_positions.unsqueeze(-1).expand({-1, -1, hidden});
  const at::Tensor gathered = out.sequence_output.gather(/*dim=*/1, index);
  PretrainLogits logits;
  logits.masked_lm =
      cls->predictions->forward(gathered, bert->embeddings()->word_embeddings->weight);
  if (cls->seq_relationship) {
    logits.next_sentence = cls->seq_relationship->forward(out.pooled_output);
  }
  return logits;
}

PretrainLosses pretrain_losses(const PretrainLogits& logits, const at::Tensor& masked_lm_ids,
                               const at::Tensor& masked_lm_weights,
                               const at::Tensor& next_sentence_labels) {
  BERTLAB_CHECK(logits.masked_lm.dim() == 3 && masked_lm_ids.dim() == 2 &&
                    logits.masked_lm.size(0) == masked_lm_ids.size(0) &&
                    logits.masked_lm.size(1) == masked_lm_ids.size(1),
                "pretrain: masked-LM logits [{}] and ids [{}] must be [batch, predictions, vocab] "
                "and [batch, predictions]",
                fmt::join(logits.masked_lm.sizes(), ", "), fmt::join(masked_lm_ids.sizes(), ", "));
  const int64_t vocab = logits.masked_lm.size(2);
  const at::Tensor log_probs = at::log_softmax(logits.masked_lm.reshape({-1, vocab}), -1);
  PretrainLosses out;
  out.masked_lm_example_loss =
      -log_probs.gather(1, masked_lm_ids.reshape({-1, 1})).squeeze(1);  // [batch·predictions]
  const at::Tensor weights = masked_lm_weights.reshape({-1});
  out.masked_lm_sum = (weights * out.masked_lm_example_loss).sum();
  out.masked_lm_weight = weights.sum();
  if (!logits.next_sentence.defined()) return out;  // masked LM only
  const at::Tensor nsp_log_probs = at::log_softmax(logits.next_sentence, -1);
  out.next_sentence_example_loss =
      -nsp_log_probs.gather(1, next_sentence_labels.reshape({-1, 1})).squeeze(1);
  out.next_sentence_mean = out.next_sentence_example_loss.mean();
  return out;
}

void PretrainMetrics::add(const PretrainLogits& logits, const PretrainLosses& losses,
                          const at::Tensor& masked_lm_ids, const at::Tensor& masked_lm_weights,
                          const at::Tensor& next_sentence_labels) {
  const at::Tensor weights = masked_lm_weights.reshape({-1}).to(at::kDouble);
  const at::Tensor hits =
      logits.masked_lm.argmax(-1).reshape({-1}).eq(masked_lm_ids.reshape({-1})).to(at::kDouble);
  mlm_correct_ += (hits * weights).sum().item<double>();
  mlm_loss_ += (losses.masked_lm_example_loss.to(at::kDouble) * weights).sum().item<double>();
  mlm_weight_ += weights.sum().item<double>();
  if (!logits.next_sentence.defined()) return;  // masked LM only
  const at::Tensor labels = next_sentence_labels.reshape({-1});
  nsp_correct_ += logits.next_sentence.argmax(-1).eq(labels).sum().item<double>();
  nsp_loss_ += losses.next_sentence_example_loss.to(at::kDouble).sum().item<double>();
  nsp_count_ += static_cast<double>(labels.size(0));
}

namespace {
double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }
}  // namespace

double PretrainMetrics::masked_lm_accuracy() const { return ratio(mlm_correct_, mlm_weight_); }
double PretrainMetrics::masked_lm_loss() const { return ratio(mlm_loss_, mlm_weight_); }
double PretrainMetrics::next_sentence_accuracy() const { return ratio(nsp_correct_, nsp_count_); }
double PretrainMetrics::next_sentence_loss() const { return ratio(nsp_loss_, nsp_count_); }

}  // namespace bertlab::pretrain
