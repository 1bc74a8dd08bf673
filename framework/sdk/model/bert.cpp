// BERT's encoder with the semantics of Google's modeling.py and Hugging Face's parameter names.
//
// The forward pass calls fused ATen kernels directly (at::linear, at::layer_norm, at::baddbmm,
// at::softmax) on the registered parameters; the modules exist for the names and for
// train()/eval().

#include <bertlab/error.h>
#include <bertlab/model/bert.h>
#include <bertlab/random.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <cmath>

namespace bertlab {

namespace {

// Google's modeling.py uses this epsilon in every layer_norm.
constexpr double kLayerNormEps = kBertLayerNormEps;
// Added to the attention scores of masked-out positions, as Google's attention_layer.
constexpr double kMaskedScore = -10000.0;

enum class Activation { kGeluErf, kGeluTanh, kRelu, kTanh, kLinear };

Activation parse_activation(const std::string& name) {
  if (name == "gelu") return Activation::kGeluErf;
  if (name == "gelu_new" || name == "gelu_tanh") return Activation::kGeluTanh;
  if (name == "relu") return Activation::kRelu;
  if (name == "tanh") return Activation::kTanh;
  if (name == "linear") return Activation::kLinear;
  throw ConfigError(fmt::format("BERT config: unknown hidden_act \"{}\"", name));
}

std::string shape_str(at::IntArrayRef sizes) { return fmt::format("[{}]", fmt::join(sizes, ", ")); }

at::Tensor activate(const at::Tensor& x, Activation act) {
  switch (act) {
    case Activation::kGeluErf:
      return at::gelu(x);
    case Activation::kGeluTanh:
      return at::gelu(x, "tanh");
    case Activation::kRelu:
      return at::relu(x);
    case Activation::kTanh:
      return at::tanh(x);
    case Activation::kLinear:
      return x;
  }
  return x;
}

at::Tensor linear(const at::Tensor& x, const torch::nn::Linear& layer) {
  return at::linear(x, layer->weight, layer->bias);
}

at::Tensor layer_norm(const at::Tensor& x, const torch::nn::LayerNorm& ln) {
  return at::layer_norm(x, {x.size(-1)}, ln->weight, ln->bias, kLayerNormEps);
}

// Registers an empty module under `name`: a level of the Hugging Face name hierarchy
// (encoder, attention, ...) that owns no parameters itself.
std::shared_ptr<torch::nn::Module> add_scope(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

torch::nn::Linear make_linear(torch::nn::Module& parent, const std::string& name, int64_t in,
                              int64_t out) {
  return parent.register_module(name, torch::nn::Linear(in, out));
}

torch::nn::LayerNorm make_layer_norm(torch::nn::Module& parent, int64_t width) {
  return parent.register_module(
      "LayerNorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}).eps(kLayerNormEps)));
}

}  // namespace

// One Transformer layer: encoder.layer.N.{attention.{self,output},intermediate,output}.
class BertLayerImpl : public torch::nn::Module {
 public:
  explicit BertLayerImpl(const BertConfig& c)
      : num_heads_(c.num_attention_heads),
        head_size_(c.hidden_size / c.num_attention_heads),
        hidden_dropout_(c.hidden_dropout_prob),
        attention_dropout_(c.attention_probs_dropout_prob),
        activation_(parse_activation(c.hidden_act)) {
    const int64_t h = c.hidden_size;
    auto attention = add_scope(*this, "attention");
    auto self = add_scope(*attention, "self");
    query_ = make_linear(*self, "query", h, h);
    key_ = make_linear(*self, "key", h, h);
    value_ = make_linear(*self, "value", h, h);
    auto attention_output = add_scope(*attention, "output");
    attention_dense_ = make_linear(*attention_output, "dense", h, h);
    attention_norm_ = make_layer_norm(*attention_output, h);
    auto intermediate = add_scope(*this, "intermediate");
    intermediate_dense_ = make_linear(*intermediate, "dense", h, c.intermediate_size);
    auto output = add_scope(*this, "output");
    output_dense_ = make_linear(*output, "dense", c.intermediate_size, h);
    output_norm_ = make_layer_norm(*output, h);
  }

  /// x: [batch, seq, hidden]; mask_bias: [batch * heads, 1, seq], 0 or -10000 per key.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& mask_bias) {
    const int64_t batch = x.size(0);
    const int64_t seq = x.size(1);
    const int64_t hidden = x.size(2);
    // [batch, seq, hidden] -> [batch * heads, seq, head_size]
    auto split_heads = [&](const at::Tensor& t) {
      return t.view({batch, seq, num_heads_, head_size_})
          .transpose(1, 2)
          .reshape({batch * num_heads_, seq, head_size_});
    };
    at::Tensor q = split_heads(linear(x, query_));
    at::Tensor k = split_heads(linear(x, key_));
    at::Tensor v = split_heads(linear(x, value_));
    // scores = mask_bias + (q k^T) / sqrt(head_size), in one GEMM.
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_size_));
    at::Tensor scores = at::baddbmm(mask_bias, q, k.transpose(1, 2), /*beta=*/1, /*alpha=*/scale);
    at::Tensor probs = dropout(at::softmax(scores, -1), attention_dropout_);
    at::Tensor context = at::bmm(probs, v)
                             .view({batch, num_heads_, seq, head_size_})
                             .transpose(1, 2)
                             .reshape({batch, seq, hidden});
    at::Tensor attention_out = layer_norm(
        dropout(linear(context, attention_dense_), hidden_dropout_) + x, attention_norm_);
    at::Tensor intermediate = activate(linear(attention_out, intermediate_dense_), activation_);
    return layer_norm(dropout(linear(intermediate, output_dense_), hidden_dropout_) + attention_out,
                      output_norm_);
  }

 private:
  at::Tensor dropout(const at::Tensor& x, double p) const {
    return bertlab::dropout(x, p, is_training());
  }

  int64_t num_heads_;
  int64_t head_size_;
  double hidden_dropout_;
  double attention_dropout_;
  Activation activation_;
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr};
  torch::nn::Linear attention_dense_{nullptr};
  torch::nn::LayerNorm attention_norm_{nullptr};
  torch::nn::Linear intermediate_dense_{nullptr};
  torch::nn::Linear output_dense_{nullptr};
  torch::nn::LayerNorm output_norm_{nullptr};
};

namespace {
thread_local WordEmbeddingPerturbation* current_perturbation = nullptr;
}  // namespace

WordEmbeddingPerturbation::WordEmbeddingPerturbation(at::Tensor delta)
    : delta_(std::move(delta)), previous_(current_perturbation) {
  current_perturbation = this;
}

WordEmbeddingPerturbation::~WordEmbeddingPerturbation() { current_perturbation = previous_; }

const at::Tensor* WordEmbeddingPerturbation::current() {
  return current_perturbation != nullptr && current_perturbation->delta_.defined()
             ? &current_perturbation->delta_
             : nullptr;
}

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c, bool sparse_word_embeddings) {
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(
          torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size).sparse(sparse_word_embeddings)));
  position_embeddings = register_module(
      "position_embeddings", torch::nn::Embedding(c.max_position_embeddings, c.hidden_size));
  token_type_embeddings = register_module("token_type_embeddings",
                                          torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
  LayerNorm = make_layer_norm(*this, c.hidden_size);
  dropout = register_module("dropout", torch::nn::Dropout(c.hidden_dropout_prob));
}

at::Tensor BertEmbeddingsImpl::forward(const at::Tensor& input_ids,
                                       const at::Tensor& token_type_ids) {
  const int64_t seq = input_ids.size(1);
  const int64_t max_positions = position_embeddings->weight.size(0);
  BERTLAB_CHECK(seq <= max_positions,
                "sequence length {} exceeds max_position_embeddings {}; shorten max_seq_length",
                seq, max_positions);
  at::Tensor words = at::embedding(word_embeddings->weight, input_ids, /*padding_idx=*/-1,
                                   /*scale_grad_by_freq=*/false, word_embeddings->options.sparse());
  if (const at::Tensor* delta = WordEmbeddingPerturbation::current()) {
    if (!delta->sizes().equals(words.sizes())) {
      throw ConfigError(fmt::format(
          "[adversarial] the perturbation added to the word embeddings' output has shape {}, "
          "and this replica's output has shape {}: a perturbation is sized for the examples a "
          "replica holds (its share of the step's batch), not for the global batch",
          fmt::format("[{}]", fmt::join(delta->sizes(), ", ")),
          fmt::format("[{}]", fmt::join(words.sizes(), ", "))));
    }
    words = words + *delta;
  }
  at::Tensor types = at::embedding(token_type_embeddings->weight, token_type_ids);
  // Google slices the position table rather than looking positions up: [seq, hidden].
  at::Tensor positions = position_embeddings->weight.narrow(0, 0, seq);
  at::Tensor sum = words + types;
  sum.add_(positions);  // add's backward keeps no inputs, so in place is safe
  return bertlab::dropout(
      at::layer_norm(sum, {sum.size(-1)}, LayerNorm->weight, LayerNorm->bias, kLayerNormEps),
      dropout->options.p(), is_training());
}

BertModelImpl::BertModelImpl(const BertConfig& config, bool sparse_embeddings) : config_(config) {
  config_.validate();
  embeddings_ = register_module("embeddings", BertEmbeddings(config_, sparse_embeddings));
  auto encoder = add_scope(*this, "encoder");
  auto layer_list = add_scope(*encoder, "layer");
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    layers_.push_back(
        layer_list->register_module(std::to_string(i), std::make_shared<BertLayerImpl>(config_)));
  }
  auto pooler = add_scope(*this, "pooler");
  pooler_ = make_linear(*pooler, "dense", config_.hidden_size, config_.hidden_size);
}

BertOutput BertModelImpl::forward(const at::Tensor& input_ids, const at::Tensor& token_type_ids,
                                  const at::Tensor& attention_mask) {
  BERTLAB_CHECK(input_ids.dim() == 2, "input_ids must be [batch, seq], got {} dimensions",
                input_ids.dim());
  const int64_t batch = input_ids.size(0);
  const int64_t seq = input_ids.size(1);
  const auto long_options = input_ids.options().dtype(at::kLong);
  at::Tensor types =
      token_type_ids.defined() ? token_type_ids : at::zeros({batch, seq}, long_options);
  BERTLAB_CHECK(types.sizes() == input_ids.sizes(),
                "token_type_ids {} must have the shape of input_ids {}", shape_str(types.sizes()),
                shape_str(input_ids.sizes()));

  at::Tensor hidden = embeddings_->forward(input_ids, types);

  // (1 - mask) * -10000 as Google's attention_layer, laid out once for the scores
  // ([batch * heads, seq_q, seq_k]) and shared by every layer.
  const int64_t heads = config_.num_attention_heads;
  at::Tensor mask_bias;
  if (attention_mask.defined()) {
    BERTLAB_CHECK(attention_mask.sizes() == input_ids.sizes(),
                  "attention_mask {} must have the shape of input_ids {}",
                  shape_str(attention_mask.sizes()), shape_str(input_ids.sizes()));
    at::Tensor m = attention_mask.to(hidden.scalar_type());
    mask_bias = (1.0 - m).mul_(kMaskedScore).view({batch, 1, 1, seq});
  } else {
    mask_bias = at::zeros({batch, 1, 1, seq}, hidden.options());
  }
  // [batch * heads, 1, seq_k]: baddbmm broadcasts it over the query rows.
  mask_bias = mask_bias.expand({batch, heads, 1, seq}).reshape({batch * heads, 1, seq});

  for (const auto& layer : layers_) hidden = layer->forward(hidden, mask_bias);

  at::Tensor pooled = at::tanh(linear(hidden.select(1, 0), pooler_));
  return BertOutput{hidden, pooled};
}

namespace {

// TensorFlow's truncated_normal_initializer: a normal with `stddev`, values beyond two
// standard deviations redrawn. Sampled here by the inverse CDF of the normal restricted to
// [-2, 2], which gives the same distribution without a rejection loop.
void truncated_normal_(at::Tensor& t, double stddev) {
  const double sqrt2 = std::sqrt(2.0);
  const double lo = std::erf(-2.0 / sqrt2);  // 2 * Phi(-2) - 1
  const double hi = std::erf(2.0 / sqrt2);   // 2 * Phi(2) - 1
  t.uniform_(lo, hi);
  t.erfinv_();
  t.mul_(stddev * sqrt2);
  t.clamp_(-2.0 * stddev, 2.0 * stddev);
}

}  // namespace

at::Tensor hidden_activation(const std::string& hidden_act, const at::Tensor& x) {
  return activate(x, parse_activation(hidden_act));
}

void init_bert_weights(torch::nn::Module& module, double initializer_range) {
  BERTLAB_CHECK(initializer_range > 0, "initializer_range must be > 0, got {}", initializer_range);
  c10::NoGradGuard no_grad;
  module.apply([&](torch::nn::Module& m) {
    if (auto* lin = m.as<torch::nn::Linear>()) {
      truncated_normal_(lin->weight, initializer_range);
      if (lin->bias.defined()) lin->bias.zero_();
    } else if (auto* emb = m.as<torch::nn::Embedding>()) {
      truncated_normal_(emb->weight, initializer_range);
    } else if (auto* ln = m.as<torch::nn::LayerNorm>()) {
      if (ln->weight.defined()) ln->weight.fill_(1.0);
      if (ln->bias.defined()) ln->bias.zero_();
    }
  });
}

}  // namespace bertlab
