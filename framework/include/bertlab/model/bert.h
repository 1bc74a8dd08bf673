#pragma once
// BERT as a LibTorch module, with Google's modeling.py semantics and Hugging Face parameter
// names (embeddings.word_embeddings.weight, encoder.layer.0.attention.self.query.weight, ...),
// so checkpoints map one to one.

#include <bertlab/model/bert_config.h>

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace bertlab {

struct BertOutput {
  at::Tensor sequence_output;  ///< [batch, seq, hidden]
  at::Tensor pooled_output;    ///< [batch, hidden], tanh(dense(first token))
};

class BertEmbeddingsImpl : public torch::nn::Module {
 public:
  BertEmbeddingsImpl(const BertConfig& config, bool sparse_word_embeddings);
  /// input_ids, token_type_ids: [batch, seq] int64.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& token_type_ids);

  torch::nn::Embedding word_embeddings{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};
  torch::nn::Embedding token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // NOLINT: Hugging Face's parameter name
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(BertEmbeddings);

class BertLayerImpl;  // attention + intermediate + output, defined in bert.cpp

class BertModelImpl : public torch::nn::Module {
 public:
  /// `sparse_embeddings`: the word-embedding gradient is a sparse tensor (rows of the batch).
  /// Throws ConfigError when `config` is invalid (see BertConfig::validate()).
  BertModelImpl(const BertConfig& config, bool sparse_embeddings);
  /// input_ids, token_type_ids: [batch, seq] int64; attention_mask: [batch, seq], 1 = attend,
  /// 0 = padding (Google adds -10000 to the scores of masked positions). An undefined
  /// token_type_ids means all zeros, an undefined attention_mask means all ones.
  BertOutput forward(const at::Tensor& input_ids, const at::Tensor& token_type_ids,
                     const at::Tensor& attention_mask);

  const BertConfig& config() const { return config_; }
  /// The embedding layer (e.g. to tie a masked-LM decoder to embeddings()->word_embeddings).
  BertEmbeddings& embeddings() { return embeddings_; }
  /// pooler.dense.
  torch::nn::Linear& pooler() { return pooler_; }

 private:
  BertConfig config_;
  BertEmbeddings embeddings_{nullptr};
  std::vector<std::shared_ptr<BertLayerImpl>> layers_;  // [layer], registered as encoder.layer.N
  torch::nn::Linear pooler_{nullptr};                   // registered as pooler.dense
};
TORCH_MODULE(BertModel);

/// Adds `delta` to the word embeddings' output (before the position and token-type embeddings
/// are added) in every BertEmbeddings forward on this thread while the scope lives: where
/// adversarial training ([adversarial]) perturbs the input. `delta` has the shape of that output
/// on this replica, [examples, seq, hidden]; another shape stops the forward with a ConfigError
/// naming both (a perturbation sized for the global batch, say).
class WordEmbeddingPerturbation {
 public:
  explicit WordEmbeddingPerturbation(at::Tensor delta);
  ~WordEmbeddingPerturbation();
  WordEmbeddingPerturbation(const WordEmbeddingPerturbation&) = delete;
  WordEmbeddingPerturbation& operator=(const WordEmbeddingPerturbation&) = delete;

  /// The innermost scope's delta on this thread; nullptr outside one.
  static const at::Tensor* current();

 private:
  at::Tensor delta_;
  WordEmbeddingPerturbation* previous_;
};

/// Google's modeling.py get_activation(hidden_act) applied to `x` (gelu is the erf form).
/// Throws ConfigError for an unknown name.
at::Tensor hidden_activation(const std::string& hidden_act, const at::Tensor& x);

/// The epsilon of every layer_norm in Google's modeling.py.
inline constexpr double kBertLayerNormEps = 1e-12;

/// Google's initializer: every weight matrix and embedding from a normal with stddev
/// `initializer_range` truncated at two standard deviations; biases 0; LayerNorm 1 and 0.
/// Applies to `module` and all its submodules (use it on task heads too).
void init_bert_weights(torch::nn::Module& module, double initializer_range);

}  // namespace bertlab
