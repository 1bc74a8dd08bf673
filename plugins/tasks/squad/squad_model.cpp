#include "squad_model.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace bertlab::squad {

SquadModelImpl::SquadModelImpl(const BertConfig& config, bool sparse_embeddings) {
  bert = register_module("bert", BertModel(config, sparse_embeddings));
  qa_outputs = register_module("qa_outputs",
                               torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, 2)));
  init_bert_weights(*bert, config.initializer_range);
  init_bert_weights(*qa_outputs, kSquadInitStddev);
}

SpanLogits SquadModelImpl::forward(const at::Tensor& input_ids, const at::Tensor& segment_ids,
                                   const at::Tensor& input_mask) {
  const BertOutput output = bert->forward(input_ids, segment_ids, input_mask);
  const at::Tensor logits = qa_outputs->forward(output.sequence_output);  // [batch, seq, 2]
  return SpanLogits{logits.select(/*dim=*/2, 0), logits.select(/*dim=*/2, 1)};
}

namespace {

/// Google's compute_loss: −mean over the batch of the log-probability of the gold position.
at::Tensor position_loss(const at::Tensor& logits, const at::Tensor& positions) {
  BERTLAB_CHECK(logits.dim() == 2 && positions.dim() == 1 && logits.size(0) == positions.size(0),
                "span_loss: logits [{}] and positions [{}] must be [batch, seq] and [batch]",
                fmt::join(logits.sizes(), ", "), fmt::join(positions.sizes(), ", "));
  const at::Tensor log_probs = at::log_softmax(logits, /*dim=*/-1);
  return -log_probs.gather(/*dim=*/1, positions.unsqueeze(1)).squeeze(1).mean();
}

}  // namespace

at::Tensor span_loss(const SpanLogits& logits, const at::Tensor& start_positions,
                     const at::Tensor& end_positions) {
  return (position_loss(logits.start, start_positions) + position_loss(logits.end, end_positions)) /
         2.0;
}

}  // namespace bertlab::squad
