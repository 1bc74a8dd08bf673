#pragma once
// BERT with Google's pretraining heads (run_pretraining.py's get_masked_lm_output and
// get_next_sentence_output), under Hugging Face's names (cls.predictions.*, cls.seq_relationship),
// or with the masked-LM head alone (Hugging Face's BertForMaskedLM, RoBERTa's objective).

#include <bertlab/model/bert.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace bertlab::pretrain {

/// cls.predictions.transform: dense, hidden_act, LayerNorm (Google's "transform" scope).
class PredictionTransformImpl : public torch::nn::Module {
 public:
  explicit PredictionTransformImpl(const BertConfig& config);
  at::Tensor forward(const at::Tensor& hidden);

  std::string hidden_act;
  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT: Hugging Face's parameter name
};
TORCH_MODULE(PredictionTransform);

/// cls.predictions: the transform, then the word embeddings as the decoder (tied: the same
/// tensor, no copy) plus an output bias per vocabulary entry.
class MaskedLmHeadImpl : public torch::nn::Module {
 public:
  explicit MaskedLmHeadImpl(const BertConfig& config);
  /// hidden: [..., hidden] at the masked positions; word_embeddings: [vocab, hidden].
  /// Returns logits [..., vocab].
  at::Tensor forward(const at::Tensor& hidden, const at::Tensor& word_embeddings);

  PredictionTransform transform{nullptr};
  at::Tensor bias;  // [vocab], Google's output_bias
};
TORCH_MODULE(MaskedLmHead);

/// cls: the two heads, or the masked-LM head alone when `next_sentence` is false.
class PretrainHeadsImpl : public torch::nn::Module {
 public:
  PretrainHeadsImpl(const BertConfig& config, bool next_sentence);

  MaskedLmHead predictions{nullptr};
  /// [2, hidden] weight, as Google's output_weights; null (not registered) without the
  /// next-sentence head.
  torch::nn::Linear seq_relationship{nullptr};
};
TORCH_MODULE(PretrainHeads);

struct PretrainLogits {
  at::Tensor masked_lm;      ///< [batch, max_predictions_per_seq, vocab]
  at::Tensor next_sentence;  ///< [batch, 2]; class 1 = B is the random next; undefined: no head
};

class PretrainModelImpl : public torch::nn::Module {
 public:
  /// `next_sentence` false: no cls.seq_relationship (masked LM only). BertModel keeps its pooler
  /// either way (it always has one); masked LM alone leaves it without a gradient, so the
  /// optimizer leaves it alone, as under the SQuAD head.
  PretrainModelImpl(const BertConfig& config, bool sparse_embeddings, bool next_sentence = true);
  /// [batch, seq] ids, segments and mask; masked_lm_positions [batch, predictions].
  PretrainLogits forward(const at::Tensor& input_ids, const at::Tensor& segment_ids,
                         const at::Tensor& input_mask, const at::Tensor& masked_lm_positions);

  BertModel bert{nullptr};
  PretrainHeads cls{nullptr};
};
TORCH_MODULE(PretrainModel);

/// The per-prediction and per-example losses and what the metrics need, for one batch.
struct PretrainLosses {
  at::Tensor masked_lm_sum;               ///< Σ weight·cross-entropy over the predictions
  at::Tensor masked_lm_weight;            ///< Σ weight (real predictions)
  at::Tensor masked_lm_example_loss;      ///< [batch·predictions] cross-entropy per prediction
  at::Tensor next_sentence_mean;          ///< mean cross-entropy over the batch; undefined: no head
  at::Tensor next_sentence_example_loss;  ///< [batch]; undefined: no head
};

/// Google's losses: masked LM −log p(label) per prediction weighted by masked_lm_weights;
/// next sentence −log p(label) per example (only when the logits have it).
PretrainLosses pretrain_losses(const PretrainLogits& logits, const at::Tensor& masked_lm_ids,
                               const at::Tensor& masked_lm_weights,
                               const at::Tensor& next_sentence_labels);

/// run_pretraining.py's metric_fn, accumulated over evaluation batches: tf.metrics.accuracy and
/// tf.metrics.mean weighted by masked_lm_weights for the masked LM, unweighted for the next
/// sentence. Logits without next-sentence ones add to the masked-LM metrics alone.
class PretrainMetrics {
 public:
  /// Adds one batch: its logits, losses (pretrain_losses) and labels.
  void add(const PretrainLogits& logits, const PretrainLosses& losses,
           const at::Tensor& masked_lm_ids, const at::Tensor& masked_lm_weights,
           const at::Tensor& next_sentence_labels);
  double masked_lm_accuracy() const;
  double masked_lm_loss() const;
  double next_sentence_accuracy() const;
  double next_sentence_loss() const;

 private:
  double mlm_correct_ = 0, mlm_loss_ = 0, mlm_weight_ = 0;  // weighted sums
  double nsp_correct_ = 0, nsp_loss_ = 0, nsp_count_ = 0;
};

}  // namespace bertlab::pretrain
