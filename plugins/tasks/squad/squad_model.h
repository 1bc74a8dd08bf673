#pragma once
// The span head of run_squad.py's create_model: one dense layer from BERT's sequence output to
// a start and an end logit per token. Parameter names follow Hugging Face's
// BertForQuestionAnswering: bert.*, qa_outputs.weight [2, hidden], qa_outputs.bias [2]
// (Google's cls/squad/output_weights and output_bias).

#include <ATen/core/Tensor.h>
#include <bertlab/model/bert.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace bertlab::squad {

/// Start and end logits, each [batch, seq].
struct SpanLogits {
  at::Tensor start;
  at::Tensor end;
};

class SquadModelImpl : public torch::nn::Module {
 public:
  /// A freshly initialized model drawing from libtorch's global generator: BERT as
  /// init_bert_weights(initializer_range), qa_outputs.weight from a normal with stddev 0.02
  /// truncated at two standard deviations and a zero bias (as Google's output_weights).
  SquadModelImpl(const BertConfig& config, bool sparse_embeddings);

  /// input_ids, segment_ids, input_mask: [batch, seq] int64. Padding positions get logits too,
  /// as in Google's model; prediction never picks them (they are not in token_to_orig).
  SpanLogits forward(const at::Tensor& input_ids, const at::Tensor& segment_ids,
                     const at::Tensor& input_mask);

  BertModel bert{nullptr};
  torch::nn::Linear qa_outputs{nullptr};
};
TORCH_MODULE(SquadModel);

/// Stddev of Google's cls/squad/output_weights initializer.
inline constexpr double kSquadInitStddev = 0.02;

/// run_squad.py's loss: the mean over the batch of the start and end cross-entropies, halved
/// sum. logits [batch, seq] float, positions [batch] int64 → scalar.
at::Tensor span_loss(const SpanLogits& logits, const at::Tensor& start_positions,
                     const at::Tensor& end_positions);

}  // namespace bertlab::squad
