#pragma once
// Google's bert_config.json as a plain struct: what a model is, without LibTorch (experiment
// resolution and reports read it; bert.h builds the model from it).

#include <bertlab/config.h>

#include <cstdint>
#include <filesystem>
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

}  // namespace bertlab
