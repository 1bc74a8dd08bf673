// Google BERT's AdamWeightDecay against updates worked out by hand.

#include "adam_weight_decay.h"

#include <bertlab/error.h>
#include <bertlab/grad.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>

namespace bertlab::adam_weight_decay {
namespace {

using Pair = std::array<double, 2>;

at::Tensor tensor2(const Pair& v, at::ScalarType dtype = at::kFloat) {
  return at::tensor(std::vector<double>{v[0], v[1]}, at::kDouble).to(dtype);
}

GradientEntry dense_entry(const std::string& name, const Pair& g,
                          at::ScalarType dtype = at::kFloat) {
  GradientEntry e;
  e.name = name;
  e.shape = {2};
  e.dense = tensor2(g, dtype);
  return e;
}

// The scalar arithmetic of Google's apply_gradients for one element, in double.
struct HandAdam {
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-6, weight_decay = 0.1;
  double m = 0, v = 0;
  void step(double& w, double g, double lr, bool decay) {
    m = beta_1 * m + (1 - beta_1) * g;
    v = beta_2 * v + (1 - beta_2) * g * g;
    double update = m / (std::sqrt(v) + epsilon);
    if (decay) update += weight_decay * w;
    w -= lr * update;
  }
};

AdamWeightDecayOptions test_options() {
  AdamWeightDecayOptions o;
  o.schedule.learning_rate = 0.1;
  o.schedule.num_warmup_steps = 2;
  o.adam.weight_decay_rate = 0.1;
  o.clip.clip_norm = 1.0;
  return o;
}

// Three steps over a decayed weight, a LayerNorm weight and a bias (both excluded from decay):
//   step 0: warmup, lr = 0.1 * 0/2 = 0      (moments move, weights do not)
//   step 1: warmup, lr = 0.1 * 1/2 = 0.05   gradient norm 5 -> clipped by 1/5
//   step 2: decay,  lr = 0.1 * (1 - 2/10) = 0.08
TEST(AdamWeightDecay, ThreeStepsByHand) {
  const std::vector<std::string> names = {"encoder.dense.weight", "encoder.LayerNorm.weight",
                                          "encoder.dense.bias"};
  const std::vector<bool> decayed = {true, false, false};
  std::vector<Pair> w = {{1.0, -2.0}, {0.5, 0.25}, {0.1, -0.1}};
  const std::vector<std::vector<Pair>> grads = {
      {{0.3, -0.4}, {0.1, 0.0}, {0.0, 0.2}},    // norm sqrt(0.3): kept
      {{3.0, 4.0}, {0.0, 0.0}, {0.0, 0.0}},     // norm 5: scaled by 1/5
      {{-0.2, 0.1}, {0.2, -0.1}, {0.05, 0.0}},  // norm sqrt(0.1025): kept
  };
  const std::vector<double> lrs = {0.0, 0.05, 0.08};
  const std::vector<double> norms = {std::sqrt(0.3), 5.0, std::sqrt(0.1025)};
  const std::vector<double> clip = {1.0, 0.2, 1.0};

  std::vector<NamedTensor> params;
  for (size_t p = 0; p < names.size(); ++p) params.push_back({names[p], tensor2(w[p])});
  AdamWeightDecay opt(test_options());
  opt.init(params, OptimizerContext{10});
  EXPECT_TRUE(opt.uses_weight_decay(names[0]));
  EXPECT_FALSE(opt.uses_weight_decay(names[1]));
  EXPECT_FALSE(opt.uses_weight_decay(names[2]));

  std::vector<std::array<HandAdam, 2>> hand(names.size());
  for (int step = 0; step < 3; ++step) {
    GradientSet set;
    for (size_t p = 0; p < names.size(); ++p) set.add(dense_entry(names[p], grads[step][p]));
    StepStats stats = opt.step(set, step);
    EXPECT_NEAR(stats.learning_rate, lrs[step], 1e-12);
    EXPECT_NEAR(stats.grad_norm, norms[step], 1e-6);
    for (size_t p = 0; p < names.size(); ++p) {
      for (int i = 0; i < 2; ++i) {
        hand[p][i].step(w[p][i], grads[step][p][i] * clip[step], lrs[step], decayed[p]);
        EXPECT_NEAR(params[p].tensor[i].item<double>(), w[p][i], 2e-6)
            << names[p] << "[" << i << "] after step " << step;
      }
    }
    if (step == 0) {
      // lr 0: the weights are exactly as they were.
      EXPECT_EQ(params[0].tensor[0].item<float>(), 1.0f);
      EXPECT_EQ(params[2].tensor[1].item<float>(), -0.1f);
    }
  }
  // The same numbers worked out independently (Python, double precision).
  const std::vector<Pair> expected = {
      {0.572804077, -2.190743564}, {0.039737524, 0.502902238}, {-0.152822314, -0.447439434}};
  for (size_t p = 0; p < names.size(); ++p) {
    for (int i = 0; i < 2; ++i)
      EXPECT_NEAR(params[p].tensor[i].item<double>(), expected[p][i], 2e-6);
  }
  auto [m, v] = opt.slots("encoder.dense.weight");
  EXPECT_NEAR(m[0].item<double>(), hand[0][0].m, 1e-7);
  EXPECT_NEAR(v[1].item<double>(), hand[0][1].v, 1e-9);
}

TEST(AdamWeightDecay, GenericPathMatchesFusedPath) {
  // Double tensors take the tensor-op path (the one CUDA uses); float tensors the fused loop.
  auto run = [](at::ScalarType dtype) {
    std::vector<NamedTensor> params = {{"a.weight", tensor2({0.7, -1.3}, dtype)},
                                       {"a.bias", tensor2({0.2, 0.4}, dtype)}};
    AdamWeightDecay opt(test_options());
    opt.init(params, OptimizerContext{10});
    for (int step = 0; step < 4; ++step) {
      GradientSet set;
      set.add(dense_entry("a.weight", {0.5 - step, 0.25 * step}, dtype));
      set.add(dense_entry("a.bias", {-0.3, 0.1 * step}, dtype));
      opt.step(set, step);
    }
    return at::cat({params[0].tensor, params[1].tensor}).to(at::kDouble);
  };
  EXPECT_TRUE(at::allclose(run(at::kFloat), run(at::kDouble), 1e-6, 1e-6));
}

TEST(AdamWeightDecay, ClippingDisabledAndMissingGradients) {
  AdamWeightDecayOptions o = test_options();
  o.clip.clip_norm = 0;
  o.schedule.num_warmup_steps = 0;
  std::vector<NamedTensor> params = {{"x.weight", tensor2({1.0, 1.0})},
                                     {"y.weight", tensor2({2.0, 2.0})}};
  AdamWeightDecay opt(o);
  opt.init(params, OptimizerContext{10});
  GradientSet set;
  set.add(dense_entry("x.weight", {30.0, 40.0}));
  StepStats stats = opt.step(set, 0);
  EXPECT_DOUBLE_EQ(stats.learning_rate, 0.1);  // no warmup: the full rate at step 0
  EXPECT_NEAR(stats.grad_norm, 50.0, 1e-9);
  // Unclipped gradient [30, 40]: m = 0.1 g, v = 0.001 g^2, update = 0.1/sqrt(0.001) + 0.1 w.
  auto [m, v] = opt.slots("x.weight");
  EXPECT_NEAR(m[1].item<double>(), 4.0, 1e-6);
  const double update = 0.1 * 30.0 / (std::sqrt(0.001 * 900.0) + 1e-6) + 0.1 * 1.0;
  EXPECT_NEAR(params[0].tensor[0].item<double>(), 1.0 - 0.1 * update, 1e-6);
  // A parameter without a gradient entry is left alone, as apply_gradients skips None.
  EXPECT_TRUE(at::equal(params[1].tensor, tensor2({2.0, 2.0})));

  GradientSet unknown;
  unknown.add(dense_entry("z.weight", {1.0, 1.0}));
  EXPECT_THROW(opt.step(unknown, 1), Error);
}

// A 4x2 embedding gradient with row 1 stored twice:
//   rows 1 -> u1 = [1, 2], 3 -> [0, 1], 1 -> u2 = [3, -1]   (dense row 1 = [4, 1])
GradientEntry sparse_entry() {
  GradientEntry e;
  e.name = "embeddings.word_embeddings.weight";
  e.shape = {4, 2};
  e.indices = at::tensor(std::vector<int64_t>{1, 3, 1}, at::kLong);
  e.values = at::tensor(std::vector<float>{1, 2, 0, 1, 3, -1}, at::kFloat).reshape({3, 2});
  return e;
}

at::Tensor embedding_init(at::ScalarType dtype = at::kFloat) {
  return at::tensor(std::vector<float>{0.5, -0.5, 1.0, 2.0, -1.0, 0.0, 0.25, 0.75}, at::kFloat)
      .reshape({4, 2})
      .to(dtype);
}

struct SparseRun {
  at::Tensor weight, m, v;
};

// Float parameters take the fused CPU kernels, double ones the tensor-op path CUDA uses.
SparseRun run_embedding(SparseUpdate mode, bool as_dense, int steps,
                        at::ScalarType dtype = at::kFloat) {
  AdamWeightDecayOptions o = test_options();
  o.clip.clip_norm = 0;  // keep the arithmetic plain
  o.schedule.num_warmup_steps = 0;
  o.sparse_update = mode;
  std::vector<NamedTensor> params = {{"embeddings.word_embeddings.weight", embedding_init(dtype)}};
  AdamWeightDecay opt(o);
  opt.init(params, OptimizerContext{10});
  for (int step = 1; step <= steps; ++step) {
    GradientSet set;
    GradientEntry entry = sparse_entry();
    entry.values = entry.values.to(dtype);
    set.add(entry);
    if (as_dense) set.densify();
    opt.step(set, step);
  }
  auto [m, v] = opt.slots("embeddings.word_embeddings.weight");
  return {params[0].tensor, m, v};
}

TEST(AdamWeightDecay, SparseGradientEqualsItsDenseForm) {
  SparseRun sparse = run_embedding(SparseUpdate::kDense, /*as_dense=*/false, 3);
  SparseRun dense = run_embedding(SparseUpdate::kDense, /*as_dense=*/true, 3);
  EXPECT_TRUE(at::equal(sparse.weight, dense.weight));
  EXPECT_TRUE(at::equal(sparse.m, dense.m));
  EXPECT_TRUE(at::equal(sparse.v, dense.v));
}

TEST(AdamWeightDecay, ScatterDuplicatesReproducesTheBug) {
  SparseRun right = run_embedding(SparseUpdate::kDense, false, 1);
  SparseRun bug = run_embedding(SparseUpdate::kScatterDuplicates, false, 1);
  // m is linear in the gradient: duplicates scatter-added give the same sum.
  EXPECT_TRUE(at::allclose(bug.m, right.m));
  // v at row 1: (1 - b2) * (u1^2 + u2^2) = 0.001 * [1 + 9, 4 + 1] instead of 0.001 * [16, 1].
  EXPECT_NEAR(right.v[1][0].item<double>(), 0.016, 1e-9);
  EXPECT_NEAR(right.v[1][1].item<double>(), 0.001, 1e-9);
  EXPECT_NEAR(bug.v[1][0].item<double>(), 0.010, 1e-9);
  EXPECT_NEAR(bug.v[1][1].item<double>(), 0.005, 1e-9);
  // Rows seen once agree.
  EXPECT_TRUE(at::allclose(bug.v[3], right.v[3]));
  EXPECT_TRUE(at::allclose(bug.weight[3], right.weight[3]));
  // Row 1's weights by hand, lr = 0.1 * (1 - 1/10) = 0.09, decayed (not an excluded name).
  const double lr = 0.09;
  const double w0 = 1.0, w1 = 2.0;
  const double m0 = 0.1 * 4.0, m1 = 0.1 * 1.0;
  EXPECT_NEAR(bug.weight[1][0].item<double>(),
              w0 - lr * (m0 / (std::sqrt(0.010) + 1e-6) + 0.1 * w0), 1e-6);
  EXPECT_NEAR(bug.weight[1][1].item<double>(),
              w1 - lr * (m1 / (std::sqrt(0.005) + 1e-6) + 0.1 * w1), 1e-6);
  EXPECT_NEAR(right.weight[1][0].item<double>(),
              w0 - lr * (m0 / (std::sqrt(0.016) + 1e-6) + 0.1 * w0), 1e-6);
  // Rows without a gradient still decay: m = v = 0, so the update is wd * w alone.
  EXPECT_NEAR(bug.weight[0][0].item<double>(), 0.5 - lr * 0.1 * 0.5, 1e-7);
  EXPECT_NEAR(right.weight[2][0].item<double>(), -1.0 - lr * 0.1 * -1.0, 1e-7);
}

TEST(AdamWeightDecay, SparseKernelsMatchTensorOps) {
  for (SparseUpdate mode : {SparseUpdate::kDense, SparseUpdate::kScatterDuplicates}) {
    SparseRun fused = run_embedding(mode, false, 3, at::kFloat);
    SparseRun generic = run_embedding(mode, false, 3, at::kDouble);
    EXPECT_TRUE(at::allclose(fused.weight.to(at::kDouble), generic.weight, 1e-6, 1e-7));
    EXPECT_TRUE(at::allclose(fused.v.to(at::kDouble), generic.v, 1e-6, 1e-9));
  }
}

TEST(AdamWeightDecay, Schedule) {
  AdamWeightDecayOptions o;
  o.schedule.learning_rate = 1.0;
  AdamWeightDecay opt(o);
  opt.init({}, OptimizerContext{100});
  EXPECT_EQ(opt.num_warmup_steps(), 10);  // int(100 * 0.1)
  EXPECT_DOUBLE_EQ(opt.learning_rate(0), 0.0);
  EXPECT_DOUBLE_EQ(opt.learning_rate(5), 0.5);
  EXPECT_DOUBLE_EQ(opt.learning_rate(9), 0.9);
  EXPECT_DOUBLE_EQ(opt.learning_rate(10), 0.9);  // warmup over: the decayed rate 1 - 10/100
  EXPECT_DOUBLE_EQ(opt.learning_rate(50), 0.5);
  EXPECT_NEAR(opt.learning_rate(99), 0.01, 1e-15);
  EXPECT_DOUBLE_EQ(opt.learning_rate(100), 0.0);
  EXPECT_DOUBLE_EQ(opt.learning_rate(250), 0.0);

  AdamWeightDecay truncated(o);
  truncated.init({}, OptimizerContext{25});
  EXPECT_EQ(truncated.num_warmup_steps(), 2);  // int(2.5)

  o.schedule.num_warmup_steps = 0;
  AdamWeightDecay no_warmup(o);
  no_warmup.init({}, OptimizerContext{4});
  EXPECT_DOUBLE_EQ(no_warmup.learning_rate(0), 1.0);
  EXPECT_DOUBLE_EQ(no_warmup.learning_rate(1), 0.75);

  AdamWeightDecay unset(o);
  EXPECT_THROW(unset.init({}, OptimizerContext{0}), Error);
}

TEST(AdamWeightDecayOptions, FromConfig) {
  std::vector<OptionDecl> decls = AdamWeightDecayOptions::declarations();
  for (const auto& d : decls) {
    ASSERT_TRUE(d.default_value.has_value()) << d.key;
    EXPECT_FALSE(check_value(d, *d.default_value).has_value()) << d.key;
  }
  AdamWeightDecayOptions defaults =
      AdamWeightDecayOptions::from_config(ConfigView("optimizer", decls, {}));
  EXPECT_DOUBLE_EQ(defaults.schedule.learning_rate, 5e-5);
  EXPECT_EQ(defaults.schedule.num_warmup_steps, -1);
  EXPECT_EQ(defaults.clip.mode, NormMode::kCoalesced);
  EXPECT_EQ(defaults.sparse_update, SparseUpdate::kDense);
  EXPECT_EQ(defaults.exclusion.parts,
            (std::vector<std::string>{"LayerNorm", "layer_norm", "bias"}));

  std::map<std::string, OptionValue> values = {
      {"learning_rate", int64_t{1}},
      {"clip_norm_mode", std::string("uncoalesced")},
      {"sparse_update", std::string("scatter_duplicates")},
      {"exclude_from_weight_decay", std::string(" LayerNorm , ,pooler")},
      {"num_warmup_steps", int64_t{7}}};
  ConfigView view("optimizer", decls, values);
  AdamWeightDecayOptions o = AdamWeightDecayOptions::from_config(view);
  EXPECT_DOUBLE_EQ(o.schedule.learning_rate, 1.0);
  EXPECT_EQ(o.clip.mode, NormMode::kUncoalesced);
  EXPECT_EQ(o.sparse_update, SparseUpdate::kScatterDuplicates);
  EXPECT_EQ(o.exclusion.parts, (std::vector<std::string>{"LayerNorm", "pooler"}));
  EXPECT_EQ(o.schedule.num_warmup_steps, 7);
  EXPECT_TRUE(view.unread_keys().empty());

  AdamWeightDecay opt(o);
  EXPECT_TRUE(opt.uses_weight_decay("bert.encoder.layer.0.output.dense.bias"));
  EXPECT_FALSE(opt.uses_weight_decay("bert.pooler.dense.weight"));

  AdamWeightDecayOptions bad;
  bad.adam.beta_1 = 1.0;
  EXPECT_THROW(bad.validate(), ConfigError);
  bad = AdamWeightDecayOptions();
  bad.schedule.num_warmup_steps = -2;
  EXPECT_THROW(AdamWeightDecay{bad}, ConfigError);
}

}  // namespace
}  // namespace bertlab::adam_weight_decay

namespace bertlab::adam_weight_decay {
namespace {

TEST(AdamWeightDecay, ANonFiniteGradientUpdatesNothing) {
  std::vector<NamedTensor> params = {{"layer.dense.weight", tensor2({3.0, 4.0})}};
  AdamWeightDecay opt(test_options());
  opt.init(params, OptimizerContext{10});
  GradientSet set;
  set.add(dense_entry("layer.dense.weight", {1.0, std::numeric_limits<double>::infinity()}));
  const StepStats stats = opt.step(set, 5);
  EXPECT_FALSE(std::isfinite(stats.grad_norm));
  EXPECT_TRUE(at::equal(params[0].tensor, tensor2({3.0, 4.0})));
  EXPECT_TRUE(at::equal(opt.slots("layer.dense.weight").first, at::zeros({2})));
}

}  // namespace
}  // namespace bertlab::adam_weight_decay
