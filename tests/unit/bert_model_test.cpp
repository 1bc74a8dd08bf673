// BertModel and BertConfig: names, shapes, masking, dropout, sparse gradients, initialization.

#include "test_util.h"

#include <bertlab/error.h>
#include <bertlab/model/bert.h>
#include <bertlab/random.h>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

namespace bertlab {
namespace {

BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 99;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  c.max_position_embeddings = 64;
  c.type_vocab_size = 2;
  return c;
}

struct Inputs {
  at::Tensor ids, types, mask;
};

// Batch of 3 sequences of 10 tokens; sequence 1 has 3 padding positions at the end.
Inputs tiny_inputs() {
  at::manual_seed(7);
  Inputs in;
  in.ids = at::randint(1, 99, {3, 10}, at::kLong);
  in.types = at::cat({at::zeros({3, 5}, at::kLong), at::ones({3, 5}, at::kLong)}, 1);
  in.mask = at::ones({3, 10}, at::kLong);
  in.mask[1].narrow(0, 7, 3).zero_();
  return in;
}

BertModel tiny_model(bool sparse = false) {
  BertConfig config = tiny_config();
  BertModel model(config, sparse);
  init_bert_weights(*model, config.initializer_range);
  return model;
}

void copy_parameters(const torch::nn::Module& from, torch::nn::Module& to) {
  c10::NoGradGuard no_grad;
  auto source = from.named_parameters();
  for (auto& item : to.named_parameters()) item.value().copy_(source[item.key()]);
}

TEST(BertModel, HuggingFaceParameterNames) {
  BertModel model = tiny_model();
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"embeddings.word_embeddings.weight", {99, 32}},
      {"embeddings.position_embeddings.weight", {64, 32}},
      {"embeddings.token_type_embeddings.weight", {2, 32}},
      {"embeddings.LayerNorm.weight", {32}},
      {"embeddings.LayerNorm.bias", {32}},
  };
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "encoder.layer." + std::to_string(layer) + ".";
    for (const char* qkv : {"query", "key", "value"}) {
      expected.push_back({p + "attention.self." + qkv + ".weight", {32, 32}});
      expected.push_back({p + "attention.self." + qkv + ".bias", {32}});
    }
    expected.push_back({p + "attention.output.dense.weight", {32, 32}});
    expected.push_back({p + "attention.output.dense.bias", {32}});
    expected.push_back({p + "attention.output.LayerNorm.weight", {32}});
    expected.push_back({p + "attention.output.LayerNorm.bias", {32}});
    expected.push_back({p + "intermediate.dense.weight", {64, 32}});
    expected.push_back({p + "intermediate.dense.bias", {64}});
    expected.push_back({p + "output.dense.weight", {32, 64}});
    expected.push_back({p + "output.dense.bias", {32}});
    expected.push_back({p + "output.LayerNorm.weight", {32}});
    expected.push_back({p + "output.LayerNorm.bias", {32}});
  }
  expected.push_back({"pooler.dense.weight", {32, 32}});
  expected.push_back({"pooler.dense.bias", {32}});

  std::vector<std::pair<std::string, std::vector<int64_t>>> actual;
  for (const auto& item : model->named_parameters()) {
    actual.push_back({item.key(), item.value().sizes().vec()});
  }
  EXPECT_EQ(actual, expected);

  // Under a task model the names gain the "bert." prefix.
  auto task = std::make_shared<torch::nn::Module>();
  task->register_module("bert", model);
  EXPECT_EQ(task->named_parameters().keys().front(), "bert.embeddings.word_embeddings.weight");
}

TEST(BertModel, ForwardShapes) {
  BertModel model = tiny_model();
  Inputs in = tiny_inputs();
  BertOutput out = model->forward(in.ids, in.types, in.mask);
  EXPECT_EQ(out.sequence_output.sizes().vec(), (std::vector<int64_t>{3, 10, 32}));
  EXPECT_EQ(out.pooled_output.sizes().vec(), (std::vector<int64_t>{3, 32}));
  EXPECT_TRUE(at::isfinite(out.sequence_output).all().item<bool>());
  // Pooled output is tanh(dense(first token)).
  EXPECT_LE(out.pooled_output.abs().max().item<float>(), 1.0f);
  // Every LayerNorm output has (nearly) zero mean over hidden.
  EXPECT_LT(out.sequence_output.mean(-1).abs().max().item<float>(), 1e-5);

  // Undefined token types and mask mean zeros and ones.
  model->eval();
  at::Tensor a = model->forward(in.ids, at::Tensor(), at::Tensor()).sequence_output;
  at::Tensor b =
      model->forward(in.ids, at::zeros_like(in.ids), at::ones_like(in.ids)).sequence_output;
  EXPECT_TRUE(at::equal(a, b));

  // Too long for the position table.
  at::Tensor too_long = at::ones({1, 65}, at::kLong);
  EXPECT_THROW(model->forward(too_long, at::Tensor(), at::Tensor()), Error);
}

TEST(BertModel, MaskedPositionsDoNotLeak) {
  BertModel model = tiny_model();
  model->eval();
  Inputs in = tiny_inputs();
  BertOutput before = model->forward(in.ids, in.types, in.mask);
  at::Tensor changed = in.ids.clone();
  changed[1].narrow(0, 7, 3).fill_(42);
  BertOutput after = model->forward(changed, in.types, in.mask);
  // Sequence 1's unmasked positions, and its pooled output, are unchanged.
  EXPECT_TRUE(at::allclose(before.sequence_output[1].narrow(0, 0, 7),
                           after.sequence_output[1].narrow(0, 0, 7), 1e-5, 1e-6));
  EXPECT_TRUE(at::allclose(before.pooled_output, after.pooled_output, 1e-5, 1e-6));
  // The masked positions themselves did change (the inputs differ).
  EXPECT_FALSE(at::allclose(before.sequence_output[1].narrow(0, 7, 3),
                            after.sequence_output[1].narrow(0, 7, 3)));
  // Without the mask the change does leak.
  BertOutput unmasked_before = model->forward(in.ids, in.types, at::ones_like(in.mask));
  BertOutput unmasked_after = model->forward(changed, in.types, at::ones_like(in.mask));
  EXPECT_FALSE(at::allclose(unmasked_before.pooled_output, unmasked_after.pooled_output));
}

TEST(BertModel, DropoutOnlyInTraining) {
  BertModel model = tiny_model();
  Inputs in = tiny_inputs();
  model->eval();
  at::Tensor a = model->forward(in.ids, in.types, in.mask).sequence_output;
  at::Tensor b = model->forward(in.ids, in.types, in.mask).sequence_output;
  EXPECT_TRUE(at::equal(a, b));
  model->train();
  at::Tensor c = model->forward(in.ids, in.types, in.mask).sequence_output;
  at::Tensor d = model->forward(in.ids, in.types, in.mask).sequence_output;
  EXPECT_FALSE(at::allclose(c, d));
  EXPECT_FALSE(at::allclose(a, c));
}

// bertlab::dropout draws what at::dropout draws from the same generator (so one replica's
// results are those of libtorch's dropout, bit for bit), forward and backward.
TEST(Dropout, DrawsAsATenDropoutFromTheSameGenerator) {
  at::manual_seed(5);
  const at::Tensor x0 = at::randn({4, 6, 8});
  const at::Tensor upstream = at::randn({4, 6, 8});
  for (double p : {0.1, 0.5, 0.9}) {
    at::Tensor xa = x0.clone().requires_grad_(true);
    at::Tensor xb = x0.clone().requires_grad_(true);
    at::manual_seed(11);
    at::Tensor a = at::dropout(xa, p, /*train=*/true);
    at::manual_seed(11);
    at::Tensor b = bertlab::dropout(xb, p, /*train=*/true);
    EXPECT_TRUE(at::equal(a, b)) << p;
    (a * upstream).sum().backward();
    (b * upstream).sum().backward();
    EXPECT_TRUE(at::equal(xa.grad(), xb.grad())) << p;
    // About p of the entries are dropped, the rest scaled by 1 / (1 - p).
    const double dropped = (b == 0).to(at::kDouble).mean().item<double>();
    EXPECT_NEAR(dropped, p, 0.1) << p;
  }
  // Off outside training and for p = 0: the input itself, nothing drawn.
  at::manual_seed(11);
  EXPECT_TRUE(bertlab::dropout(x0, 0.3, /*train=*/false).is_same(x0));
  EXPECT_TRUE(bertlab::dropout(x0, 0.0, /*train=*/true).is_same(x0));
  const at::Tensor next = at::rand({3});
  at::manual_seed(11);
  EXPECT_TRUE(at::equal(next, at::rand({3})));
  EXPECT_TRUE(at::equal(bertlab::dropout(x0, 1.0, /*train=*/true), at::zeros_like(x0)));
}

// Thread ranks given copies of one generator draw the same masks whatever the timing, and leave
// the default generator alone; without a scope a thread draws from the default generator.
TEST(Dropout, EachThreadRankDrawsFromItsOwnCopy) {
  at::manual_seed(21);
  const at::Tensor x = at::ones({64, 64});
  std::vector<at::Generator> copies;
  {
    at::Generator seeded = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(seeded.mutex());
    for (int r = 0; r < 4; ++r) copies.push_back(seeded.clone());
  }
  std::vector<std::vector<at::Tensor>> masks(4);
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      ReplicaGeneratorScope draws(copies[static_cast<size_t>(r)]);
      for (int i = 0; i < 20; ++i)
        masks[static_cast<size_t>(r)].push_back(bertlab::dropout(x, 0.5, true));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 1; r < 4; ++r) {
    for (int i = 0; i < 20; ++i) {
      EXPECT_TRUE(at::equal(masks[0][static_cast<size_t>(i)],
                            masks[static_cast<size_t>(r)][static_cast<size_t>(i)]))
          << "rank " << r << " draw " << i;
    }
  }
  // The default generator did not move: the first draw from it is the first rank's.
  EXPECT_TRUE(at::equal(bertlab::dropout(x, 0.5, true), masks[0][0]));
  EXPECT_TRUE(replica_generator() == at::detail::getDefaultCPUGenerator());
}

TEST(BertModel, SparseEmbeddingGradientMatchesDense) {
  BertModel dense = tiny_model(false);
  BertModel sparse = tiny_model(true);
  copy_parameters(*dense, *sparse);
  dense->eval();
  sparse->eval();
  Inputs in = tiny_inputs();
  at::manual_seed(3);
  at::Tensor weights = at::randn({3, 10, 32});
  for (BertModel* m : {&dense, &sparse}) {
    BertOutput out = (*m)->forward(in.ids, in.types, in.mask);
    ((out.sequence_output * weights).sum() + out.pooled_output.sum()).backward();
  }
  const auto dense_params = dense->named_parameters();
  for (const auto& item : sparse->named_parameters()) {
    const at::Tensor& sparse_grad = item.value().grad();
    const at::Tensor& dense_grad = dense_params[item.key()].grad();
    ASSERT_TRUE(sparse_grad.defined()) << item.key();
    if (item.key() == "embeddings.word_embeddings.weight") {
      ASSERT_TRUE(sparse_grad.is_sparse());
      EXPECT_FALSE(dense_grad.is_sparse());
      EXPECT_TRUE(at::allclose(sparse_grad.to_dense(), dense_grad, 1e-5, 1e-6));
    } else {
      EXPECT_FALSE(sparse_grad.is_sparse()) << item.key();
      EXPECT_TRUE(at::allclose(sparse_grad, dense_grad, 1e-5, 1e-6)) << item.key();
    }
  }
}

TEST(BertModel, InitializerStatistics) {
  at::manual_seed(11);
  BertModel model = tiny_model();
  const double range = tiny_config().initializer_range;
  // Standard deviation of a standard normal truncated at +-2.
  const double truncated_std = 0.8796;
  for (const auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const at::Tensor& p = item.value();
    const bool is_layer_norm = name.find("LayerNorm") != std::string::npos;
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_bias) {
      EXPECT_TRUE(at::equal(p, at::zeros_like(p))) << name;
    } else if (is_layer_norm) {
      EXPECT_TRUE(at::equal(p, at::ones_like(p))) << name;
    } else {
      EXPECT_LE(p.abs().max().item<double>(), 2 * range + 1e-9) << name;
    }
  }
  at::Tensor words = model->embeddings()->word_embeddings->weight;  // 3168 values
  EXPECT_NEAR(words.std().item<double>(), range * truncated_std, range * 0.05);
  EXPECT_NEAR(words.mean().item<double>(), 0.0, range * 0.05);
  at::Tensor all_dense = at::cat({words.flatten(), model->pooler()->weight.flatten()});
  EXPECT_GT(all_dense.abs().max().item<double>(), 1.8 * range);  // tails reach near the cut
}

TEST(BertConfig, ReadsGoogleConfig) {
  BertConfig c =
      BertConfig::from_json_file(testing::data_path("vocab/bert-base-uncased/bert_config.json"));
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_DOUBLE_EQ(c.hidden_dropout_prob, 0.1);
  EXPECT_DOUBLE_EQ(c.attention_probs_dropout_prob, 0.1);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.02);
  EXPECT_NO_THROW(c.validate());

  // to_json round-trips.
  testing::TempDir dir;
  testing::write_file(dir / "copy.json", c.to_json());
  BertConfig back = BertConfig::from_json_file(dir / "copy.json");
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_EQ(back.type_vocab_size, 2);
}

TEST(BertConfig, WrongTypeNamesFileAndField) {
  testing::TempDir dir;
  const auto path = dir / "bert_config.json";
  testing::write_file(path,
                      R"({"hidden_size": "768", "hidden_dropout_prob": 0, "vocab_size": 10})");
  try {
    BertConfig::from_json_file(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find("hidden_size"), std::string::npos) << what;
    EXPECT_NE(what.find("integer"), std::string::npos) << what;
  }
  testing::write_file(path, R"({"vocab_size": 12.5})");
  EXPECT_THROW(BertConfig::from_json_file(path), ConfigError);
  testing::write_file(path, R"({"hidden_act": 1})");
  EXPECT_THROW(BertConfig::from_json_file(path), ConfigError);
  testing::write_file(path, "{ not json");
  EXPECT_THROW(BertConfig::from_json_file(path), ConfigError);
  EXPECT_THROW(BertConfig::from_json_file(dir / "missing.json"), ConfigError);
  // An integer is a valid float field.
  testing::write_file(path, R"({"hidden_dropout_prob": 0, "vocab_size": 10})");
  EXPECT_DOUBLE_EQ(BertConfig::from_json_file(path).hidden_dropout_prob, 0.0);
}

TEST(BertConfig, FieldOverrides) {
  std::vector<OptionDecl> decls = BertConfig::field_options();
  ASSERT_EQ(decls.size(), 11u);
  BertConfig c;
  for (const auto& d : decls) {
    ASSERT_TRUE(d.default_value.has_value()) << d.key;
    EXPECT_FALSE(check_value(d, *d.default_value).has_value()) << d.key;
    EXPECT_NO_THROW(c.set_field(d.key, *d.default_value)) << d.key;  // every key settable
  }
  c.set_field("hidden_size", int64_t{64});
  c.set_field("num_attention_heads", int64_t{4});
  c.set_field("hidden_dropout_prob", int64_t{0});
  c.set_field("initializer_range", 0.05);
  c.set_field("hidden_act", std::string("gelu_new"));
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_DOUBLE_EQ(c.hidden_dropout_prob, 0.0);
  EXPECT_DOUBLE_EQ(c.initializer_range, 0.05);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_NO_THROW(c.validate());
  EXPECT_THROW(c.set_field("hidden_size", std::string("big")), ConfigError);
  EXPECT_THROW(c.set_field("hidden_size", 64.0), ConfigError);
  EXPECT_THROW(c.set_field("hiden_size", int64_t{64}), ConfigError);

  c.set_field("num_attention_heads", int64_t{6});
  try {
    c.validate();
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("hidden_size (64)"), std::string::npos) << what;
    EXPECT_NE(what.find("num_attention_heads (6)"), std::string::npos) << what;
  }
  EXPECT_THROW(BertModel(c, false), ConfigError);
  c.num_attention_heads = 4;
  c.hidden_act = "swish";
  EXPECT_THROW(c.validate(), ConfigError);
  // The declaration rejects it too.
  for (const auto& d : decls) {
    if (d.key == "hidden_act") {
      EXPECT_TRUE(check_value(d, std::string("swish")).has_value());
    }
  }
}

TEST(BertModel, ActivationsAndGeluIsErf) {
  // hidden_act changes the output; gelu is the erf form, gelu_new the tanh approximation.
  Inputs in = tiny_inputs();
  std::vector<at::Tensor> outputs;
  BertModel reference = tiny_model();
  {
    // Pre-activations of order 1, where the activations differ: at the initializer's scale
    // (0.02) gelu and gelu_new differ by ~1e-7, below allclose's tolerance on some CPUs.
    const at::NoGradGuard no_grad;
    for (auto& p : reference->named_parameters()) {
      if (p.key().find("intermediate.dense.weight") != std::string::npos) p.value().mul_(50.0);
    }
  }
  for (const char* act : {"gelu", "gelu_new", "relu", "tanh"}) {
    BertConfig c = tiny_config();
    c.hidden_act = act;
    BertModel m(c, false);
    copy_parameters(*reference, *m);
    m->eval();
    outputs.push_back(m->forward(in.ids, in.types, in.mask).sequence_output);
  }
  reference->eval();
  // allclose, not equal: BLAS kernels may round differently for differently aligned copies.
  EXPECT_TRUE(at::allclose(
      outputs[0], reference->forward(in.ids, in.types, in.mask).sequence_output, 1e-6, 1e-7));
  for (size_t i = 1; i < outputs.size(); ++i) EXPECT_FALSE(at::allclose(outputs[0], outputs[i]));
  at::Tensor x = at::linspace(-3, 3, 13);
  at::Tensor erf_form = x * 0.5 * (1 + at::erf(x / std::sqrt(2.0)));
  at::Tensor tanh_form =
      x * 0.5 * (1 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  EXPECT_LT((at::gelu(x) - erf_form).abs().max().item<double>(), 1e-6);
  EXPECT_GT((at::gelu(x) - tanh_form).abs().max().item<double>(), 1e-4);
  EXPECT_LT((at::gelu(x, "tanh") - tanh_form).abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace bertlab
