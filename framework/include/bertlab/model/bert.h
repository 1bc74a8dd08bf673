#pragma once
// BERT as a LibTorch module, with Google's modeling.py semantics and Hugging Face parameter
// names (embeddings.word_embeddings.weight, encoder.layer.0.attention.self.query.weight, ...),
// so checkpoints map one to one.

#include <bertlab/config.h>

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

/// Google's bert_config.json, every field.
struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  ///< gelu (erf), relu, tanh, gelu_new / gelu_tanh
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 16;
  double initializer_range = 0.02;

  /// Reads Google's bert_config.json; unknown fields are ignored, a wrong type is an error
  /// naming the file and field.
  static BertConfig from_json_file(const std::filesystem::path& path);
  /// The declarations of the fields, for overriding them from [model].
  static std::vector<OptionDecl> field_options();
  /// Sets one field by name (a key from field_options()).
  void set_field(const std::string& key, const OptionValue& value);
  /// Throws ConfigError when the combination is invalid (hidden_size % num_attention_heads...).
  void validate() const;
  /// The JSON text of bert_config.json.
  std::string to_json() const;
};

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
