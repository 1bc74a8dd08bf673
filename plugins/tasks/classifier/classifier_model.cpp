#include "classifier_model.h"

#include <ATen/ATen.h>
#include <bertlab/error.h>
#include <bertlab/random.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace bertlab::classifier {

ClassifierModelImpl::ClassifierModelImpl(const BertConfig& config, int64_t num_labels,
                                         bool sparse_embeddings)
    : num_labels_(num_labels) {
  BERTLAB_CHECK(num_labels >= 1,
                "a classifier needs at least 1 output (1 for regression, else one per label), "
                "got {}",
                num_labels);
  bert = register_module("bert", BertModel(config, sparse_embeddings));
  dropout = register_module(
      "dropout", torch::nn::Dropout(torch::nn::DropoutOptions(config.hidden_dropout_prob)));
  classifier = register_module(
      "classifier", torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, num_labels)));
  // BertModel's constructor leaves libtorch's default initialization; draw Google's.
  init_bert_weights(*bert, config.initializer_range);
  init_bert_weights(*classifier, kClassifierInitStddev);
}

at::Tensor ClassifierModelImpl::forward(const at::Tensor& input_ids, const at::Tensor& segment_ids,
                                        const at::Tensor& input_mask) {
  const BertOutput output = bert->forward(input_ids, segment_ids, input_mask);
  return classifier->forward(
      bertlab::dropout(output.pooled_output, dropout->options.p(), is_training()));
}

at::Tensor per_example_loss(const at::Tensor& logits, const at::Tensor& label_ids) {
  BERTLAB_CHECK(
      logits.dim() == 2 && label_ids.dim() == 1 && logits.size(0) == label_ids.size(0),
      "per_example_loss: logits [{}] and label_ids [{}] must be [batch, labels] and [batch]",
      fmt::join(logits.sizes(), ", "), fmt::join(label_ids.sizes(), ", "));
  // Picking the label's log-probability equals Google's sum over the one-hot product exactly:
  // every other term is an exact zero.
  const at::Tensor log_probs = at::log_softmax(logits, /*dim=*/-1);
  return -log_probs.gather(/*dim=*/1, label_ids.unsqueeze(1)).squeeze(1);
}

at::Tensor per_example_squared_error(const at::Tensor& logits, const at::Tensor& label_values) {
  BERTLAB_CHECK(
      logits.dim() == 2 && logits.size(1) == 1 && label_values.dim() == 1 &&
          logits.size(0) == label_values.size(0),
      "per_example_squared_error: logits [{}] and label_values [{}] must be [batch, 1] and [batch]",
      fmt::join(logits.sizes(), ", "), fmt::join(label_values.sizes(), ", "));
  return (logits.squeeze(1) - label_values.to(logits.scalar_type())).pow(2);
}

}  // namespace bertlab::classifier
