#pragma once
// The sequence classifier of run_classifier.py's create_model: BERT's pooled output, dropout,
// one dense layer to the label logits (one output for a regression task). Parameter names follow
// Hugging Face's BertForSequenceClassification: bert.*, classifier.weight, classifier.bias.

#include <ATen/core/Tensor.h>
#include <bertlab/model/bert.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace bertlab::classifier {

class ClassifierModelImpl : public torch::nn::Module {
 public:
  /// A freshly initialized model drawing from libtorch's global generator: BERT as
  /// init_bert_weights(initializer_range), the classifier weight from a normal with stddev
  /// 0.02 truncated at two standard deviations and a zero bias (Google's output_weights /
  /// output_bias).
  ClassifierModelImpl(const BertConfig& config, int64_t num_labels, bool sparse_embeddings);

  /// input_ids, segment_ids, input_mask: [batch, seq] int64. Returns logits [batch, num_labels]
  /// (for regression, num_labels = 1: the predicted score).
  /// Dropout on the pooled output is active in training mode only.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& segment_ids,
                     const at::Tensor& input_mask);

  int64_t num_labels() const { return num_labels_; }

  BertModel bert{nullptr};
  torch::nn::Dropout dropout{nullptr};
  torch::nn::Linear classifier{nullptr};

 private:
  int64_t num_labels_;
};
TORCH_MODULE(ClassifierModel);

/// Stddev of Google's output_weights initializer (fixed, not the config's initializer_range).
inline constexpr double kClassifierInitStddev = 0.02;

/// Google's per_example_loss: −Σ one_hot(label) · log_softmax(logits), i.e. the cross-entropy
/// of each example. logits [batch, num_labels] float, label_ids [batch] int64 → [batch].
at::Tensor per_example_loss(const at::Tensor& logits, const at::Tensor& label_ids);

/// The regression loss of Hugging Face's BertForSequenceClassification with num_labels = 1
/// (MSELoss, here before the mean): (logit − value)² per example. logits [batch, 1] float,
/// label_values [batch] float → [batch].
at::Tensor per_example_squared_error(const at::Tensor& logits, const at::Tensor& label_values);

}  // namespace bertlab::classifier
