// The learning-rate schedules by hand; LAMB against updates worked out by hand; AdamW and SGD
// against LibTorch's own torch::optim::AdamW and torch::optim::SGD on the same gradients;
// every optimizer's state through a checkpoint round trip.

#include "adamw.h"
#include "lamb.h"
#include "sgd.h"

#include <bertlab/error.h>
#include <bertlab/grad.h>
#include <bertlab/optimizer_options.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

namespace bertlab {
namespace {

// A weight (decayed), a LayerNorm weight and a bias (both excluded by the default list).
std::vector<NamedTensor> make_parameters() {
  at::manual_seed(7);
  return {{"encoder.dense.weight", at::randn({3, 4})},
          {"encoder.LayerNorm.weight", at::randn({4})},
          {"encoder.dense.bias", at::randn({4})}};
}

std::vector<NamedTensor> clone_parameters(const std::vector<NamedTensor>& params) {
  std::vector<NamedTensor> out;
  for (const auto& p : params) out.push_back({p.name, p.tensor.clone()});
  return out;
}

// The gradients of step `step`, the same for every optimizer compared.
std::vector<at::Tensor> gradients_at(const std::vector<NamedTensor>& params, int step) {
  at::manual_seed(100 + step);
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(at::randn(p.tensor.sizes()));
  return out;
}

GradientSet gradient_set(const std::vector<NamedTensor>& params,
                         const std::vector<at::Tensor>& grads) {
  GradientSet set;
  for (size_t i = 0; i < params.size(); ++i) {
    GradientEntry e;
    e.name = params[i].name;
    e.shape = params[i].tensor.sizes().vec();
    e.dense = grads[i].clone();
    set.add(std::move(e));
  }
  return set;
}

void expect_same(const std::vector<NamedTensor>& a, const std::vector<at::Tensor>& b,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::allclose(a[i].tensor, b[i], 1e-6, 1e-7)) << what << ": " << a[i].name << "\n"
                                                             << a[i].tensor << "\nvs\n"
                                                             << b[i];
  }
}

ScheduleOptions schedule(double lr, int64_t warmup, DecayKind decay) {
  ScheduleOptions s;
  s.learning_rate = lr;
  s.num_warmup_steps = warmup;
  s.decay = decay;
  return s;
}

TEST(Schedule, KindsByHand) {
  // 100 steps, 10 of warmup, peak 1: the warmup is the same for every kind.
  for (DecayKind kind :
       {DecayKind::kLinear, DecayKind::kPolynomial, DecayKind::kCosine, DecayKind::kConstant}) {
    const Schedule s(schedule(1.0, 10, kind), 100);
    EXPECT_DOUBLE_EQ(s.at(0), 0.0) << to_string(kind);
    EXPECT_DOUBLE_EQ(s.at(5), 0.5) << to_string(kind);
  }
  // Google's linear decay counts from step 0: at the end of the warmup it is already 0.9.
  const Schedule linear(schedule(1.0, 10, DecayKind::kLinear), 100);
  EXPECT_DOUBLE_EQ(linear.at(10), 0.9);
  EXPECT_DOUBLE_EQ(linear.at(50), 0.5);
  EXPECT_DOUBLE_EQ(linear.at(100), 0.0);
  EXPECT_DOUBLE_EQ(linear.at(150), 0.0);

  ScheduleOptions poly = schedule(1.0, 10, DecayKind::kPolynomial);
  poly.power = 0.5;  // NVIDIA's degree
  const Schedule polynomial(poly, 100);
  EXPECT_NEAR(polynomial.at(19), 0.9, 1e-15);  // sqrt(1 - 0.19)
  EXPECT_NEAR(polynomial.at(64), 0.6, 1e-15);  // sqrt(1 - 0.64)
  poly.power = 2.0;
  poly.end_learning_rate = 0.1;
  EXPECT_NEAR(Schedule(poly, 100).at(50), 0.9 * 0.25 + 0.1, 1e-15);

  // Hugging Face's cosine: the full rate at the end of the warmup, half at the middle of the rest.
  const Schedule cosine(schedule(1.0, 10, DecayKind::kCosine), 100);
  EXPECT_DOUBLE_EQ(cosine.at(10), 1.0);
  EXPECT_NEAR(cosine.at(55), 0.5, 1e-15);
  EXPECT_NEAR(cosine.at(100), 0.0, 1e-15);
  EXPECT_NEAR(cosine.at(400), 0.0, 1e-15);
  EXPECT_NEAR(cosine.at(25), 0.5 * (1 + std::cos(M_PI / 6)), 1e-15);

  const Schedule constant(schedule(1.0, 10, DecayKind::kConstant), 100);
  EXPECT_DOUBLE_EQ(constant.at(10), 1.0);
  EXPECT_DOUBLE_EQ(constant.at(1000), 1.0);
  EXPECT_DOUBLE_EQ(Schedule(schedule(0.5, 0, DecayKind::kConstant), 3).at(0), 0.5);

  ScheduleOptions proportion = schedule(1.0, -1, DecayKind::kLinear);
  proportion.warmup_proportion = 0.1;
  EXPECT_EQ(Schedule(proportion, 25).num_warmup_steps(), 2);  // int(2.5)
  EXPECT_NE(cosine.describe().find("cosine"), std::string::npos) << cosine.describe();
  EXPECT_THROW(Schedule(proportion, 0), Error);
}

TEST(Schedule, ConfigErrors) {
  const auto decls = ScheduleOptions::declarations(1e-3, 0.1);
  const ScheduleOptions defaults = ScheduleOptions::from_config(ConfigView("optimizer", decls, {}));
  EXPECT_EQ(defaults.decay, DecayKind::kLinear);
  EXPECT_DOUBLE_EQ(defaults.learning_rate, 1e-3);
  const ScheduleOptions cosine = ScheduleOptions::from_config(
      ConfigView("optimizer", decls, {{"schedule", std::string("cosine")}}));
  EXPECT_EQ(cosine.decay, DecayKind::kCosine);
  try {
    ScheduleOptions::from_config(
        ConfigView("optimizer", decls, {{"learning_rate", 0.1}, {"end_learning_rate", 0.5}}));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("end_learning_rate"), std::string::npos) << e.what();
  }
}

using Pair = std::array<double, 2>;

GradientEntry pair_entry(const std::string& name, const Pair& g) {
  GradientEntry e;
  e.name = name;
  e.shape = {2};
  e.dense = at::tensor(std::vector<float>{static_cast<float>(g[0]), static_cast<float>(g[1])});
  return e;
}

// LAMB, two steps by hand: a decayed weight w = (3, 4) (‖w‖ = 5) and an excluded bias.
// Step t = 1 (step 0, no warmup, lr = 0.1·(1 − 0/10) = 0.1): m = 0.1·g, v = 0.001·g², so
// m̂ = g, v̂ = g² and the Adam part is g / (|g| + ε) ≈ sign(g); the decayed update adds 0.01·w.
TEST(Lamb, TrustRatioStepsByHand) {
  lamb::LambOptions o;
  o.schedule = schedule(0.1, 0, DecayKind::kLinear);
  o.adam.weight_decay_rate = 0.01;
  o.clip.clip_norm = 0.0;
  std::vector<NamedTensor> params = {
      {"layer.dense.weight", at::tensor(std::vector<float>{3.0F, 4.0F})},
      {"layer.dense.bias", at::tensor(std::vector<float>{0.5F, -0.5F})}};
  lamb::Lamb opt(o);
  opt.init(params, OptimizerContext{10});
  const std::vector<Pair> g_weight = {Pair{1.0, 2.0}, Pair{-0.5, 1.0}};
  const std::vector<Pair> g_bias = {Pair{0.2, -0.4}, Pair{0.1, 0.1}};
  Pair w = {3.0, 4.0};
  Pair b = {0.5, -0.5};
  Pair mw = {0, 0}, vw = {0, 0}, mb = {0, 0}, vb = {0, 0};
  for (int step = 0; step < 2; ++step) {
    GradientSet set;
    set.add(pair_entry("layer.dense.weight", g_weight[step]));
    set.add(pair_entry("layer.dense.bias", g_bias[step]));
    opt.step(set, step);
    const double lr = 0.1 * (1.0 - step / 10.0);
    const double t = step + 1;
    Pair u{};
    for (int i = 0; i < 2; ++i) {
      mw[i] = 0.9 * mw[i] + 0.1 * g_weight[step][i];
      vw[i] = 0.999 * vw[i] + 0.001 * g_weight[step][i] * g_weight[step][i];
      u[i] =
          (mw[i] / (1 - std::pow(0.9, t))) / (std::sqrt(vw[i] / (1 - std::pow(0.999, t))) + 1e-6) +
          0.01 * w[i];
    }
    // The trust ratio: ‖w‖ / ‖u‖ (at step 0: 5 / ‖(1.03, 1.04)‖ ≈ 3.416).
    const double ratio = std::hypot(w[0], w[1]) / std::hypot(u[0], u[1]);
    if (step == 0) {
      EXPECT_NEAR(ratio, 5.0 / std::hypot(1.03, 1.04), 1e-5);
    }
    EXPECT_NEAR(opt.last_trust_ratio("layer.dense.weight"), ratio, 1e-5) << "step " << step;
    EXPECT_DOUBLE_EQ(opt.last_trust_ratio("layer.dense.bias"), 1.0);
    for (int i = 0; i < 2; ++i) {
      w[i] -= lr * ratio * u[i];
      // The bias is excluded from decay and so from the trust ratio: a plain bias-corrected Adam.
      mb[i] = 0.9 * mb[i] + 0.1 * g_bias[step][i];
      vb[i] = 0.999 * vb[i] + 0.001 * g_bias[step][i] * g_bias[step][i];
      b[i] -= lr * (mb[i] / (1 - std::pow(0.9, t))) /
              (std::sqrt(vb[i] / (1 - std::pow(0.999, t))) + 1e-6);
      EXPECT_NEAR(params[0].tensor[i].item<double>(), w[i], 1e-5) << "step " << step;
      EXPECT_NEAR(params[1].tensor[i].item<double>(), b[i], 1e-6) << "step " << step;
    }
  }
}

// torch::optim parameters holding copies of `params`: group 0 the decayed weight, group 1 the
// excluded ones (weight decay 0), as a Hugging Face script builds its no_decay groups.
struct TorchParams {
  std::vector<at::Tensor> tensors;
  std::vector<torch::optim::OptimizerParamGroup> groups;
};

template <typename TorchOptions>
TorchParams torch_params(const std::vector<NamedTensor>& params, const TorchOptions& decayed,
                         const TorchOptions& excluded) {
  TorchParams out;
  for (const auto& p : params) out.tensors.push_back(p.tensor.clone().set_requires_grad(true));
  out.groups.emplace_back(std::vector<at::Tensor>{out.tensors[0]},
                          std::make_unique<TorchOptions>(decayed));
  out.groups.emplace_back(std::vector<at::Tensor>{out.tensors[1], out.tensors[2]},
                          std::make_unique<TorchOptions>(excluded));
  return out;
}

void set_torch_grads(TorchParams& torch_side, const std::vector<at::Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) torch_side.tensors[i].mutable_grad() = grads[i].clone();
}

TEST(AdamW, MatchesTorchOptimAdamW) {
  for (bool amsgrad : {false, true}) {
    adamw::AdamWOptions o;
    o.schedule = schedule(0.05, 2, DecayKind::kCosine);
    o.adam.weight_decay_rate = 0.1;
    o.amsgrad = amsgrad;
    o.clip.clip_norm = 0.0;
    std::vector<NamedTensor> ours = make_parameters();
    adamw::AdamW opt(o);
    const int64_t steps = 6;
    opt.init(ours, OptimizerContext{steps});

    auto options = torch::optim::AdamWOptions(0.05)
                       .betas(std::make_tuple(0.9, 0.999))
                       .eps(1e-8)
                       .amsgrad(amsgrad);
    auto excluded = options;
    excluded.weight_decay(0.0);
    options.weight_decay(0.1);
    TorchParams theirs = torch_params(ours, options, excluded);
    torch::optim::AdamW reference(theirs.groups, options);
    for (int step = 0; step < steps; ++step) {
      const auto grads = gradients_at(ours, step);
      GradientSet set = gradient_set(ours, grads);
      const StepStats stats = opt.step(set, step);
      for (auto& group : reference.param_groups()) {
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(stats.learning_rate);
      }
      set_torch_grads(theirs, grads);
      reference.step();
      expect_same(ours, theirs.tensors,
                  fmt::format("amsgrad {} step {} (lr {})", amsgrad, step, stats.learning_rate));
    }
  }
}

struct SgdCase {
  double momentum, dampening;
  bool nesterov;
  double weight_decay;
};

TEST(Sgd, MatchesTorchOptimSgd) {
  for (const SgdCase c : {SgdCase{0.0, 0.0, false, 0.0}, SgdCase{0.9, 0.1, false, 0.01},
                          SgdCase{0.9, 0.0, true, 0.05}}) {
    sgd::SgdOptions o;
    o.schedule = schedule(0.1, 1, DecayKind::kLinear);
    o.momentum = c.momentum;
    o.dampening = c.dampening;
    o.nesterov = c.nesterov;
    o.weight_decay_rate = c.weight_decay;
    std::vector<NamedTensor> ours = make_parameters();
    sgd::Sgd opt(o);
    const int64_t steps = 5;
    opt.init(ours, OptimizerContext{steps});

    auto options = torch::optim::SGDOptions(0.1)
                       .momentum(c.momentum)
                       .dampening(c.dampening)
                       .nesterov(c.nesterov);
    auto excluded = options;
    excluded.weight_decay(0.0);
    options.weight_decay(c.weight_decay);
    TorchParams theirs = torch_params(ours, options, excluded);
    torch::optim::SGD reference(theirs.groups, options);
    for (int step = 0; step < steps; ++step) {
      const auto grads = gradients_at(ours, step);
      GradientSet set = gradient_set(ours, grads);
      const StepStats stats = opt.step(set, step);
      for (auto& group : reference.param_groups()) {
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(stats.learning_rate);
      }
      set_torch_grads(theirs, grads);
      reference.step();
      expect_same(ours, theirs.tensors,
                  fmt::format("momentum {} nesterov {} step {}", c.momentum, c.nesterov, step));
    }
  }
}

TEST(Sgd, NesterovNeedsMomentum) {
  sgd::SgdOptions o;
  o.nesterov = true;
  try {
    sgd::Sgd opt(o);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("nesterov"), std::string::npos) << e.what();
  }
}

using Factory = std::function<std::unique_ptr<Optimizer>()>;

// Four steps straight, or two, a state_dict() into a fresh optimizer, and two more: the same.
void expect_resumes_exactly(const Factory& make, const std::string& what) {
  const int64_t steps = 4;
  std::vector<NamedTensor> straight = make_parameters();
  auto a = make();
  a->init(straight, OptimizerContext{steps});
  for (int step = 0; step < steps; ++step) {
    GradientSet set = gradient_set(straight, gradients_at(straight, step));
    a->step(set, step);
  }

  std::vector<NamedTensor> first = make_parameters();
  auto b = make();
  b->init(first, OptimizerContext{steps});
  for (int step = 0; step < 2; ++step) {
    GradientSet set = gradient_set(first, gradients_at(first, step));
    b->step(set, step);
  }
  const auto state = b->state_dict();
  std::vector<NamedTensor> resumed = clone_parameters(first);
  auto c = make();
  c->init(resumed, OptimizerContext{steps});
  c->load_state_dict(state);
  for (int step = 2; step < steps; ++step) {
    GradientSet set = gradient_set(resumed, gradients_at(resumed, step));
    c->step(set, step);
  }
  for (size_t i = 0; i < straight.size(); ++i) {
    EXPECT_TRUE(at::equal(straight[i].tensor, resumed[i].tensor))
        << what << ": " << straight[i].name;
  }
  if (!state.empty()) {
    auto missing = state;
    missing.pop_back();
    auto d = make();
    d->init(make_parameters(), OptimizerContext{steps});
    try {
      d->load_state_dict(missing);
      ADD_FAILURE() << what << ": a missing slot was not an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(state.back().first), std::string::npos) << e.what();
    }
  }
}

TEST(Optimizers, ResumeFromStateDictExactly) {
  expect_resumes_exactly(
      [] {
        lamb::LambOptions o;
        o.schedule = schedule(0.01, 1, DecayKind::kLinear);
        return std::make_unique<lamb::Lamb>(o);
      },
      "lamb");
  expect_resumes_exactly(
      [] {
        adamw::AdamWOptions o;
        o.amsgrad = true;
        return std::make_unique<adamw::AdamW>(o);
      },
      "adamw");
  expect_resumes_exactly(
      [] {
        sgd::SgdOptions o;
        o.momentum = 0.9;
        o.dampening = 0.5;  // the first step differs from the rest: the step count must resume
        return std::make_unique<sgd::Sgd>(o);
      },
      "sgd");
}

// A sparse row gradient with duplicates updates as its dense form (duplicates summed).
TEST(Optimizers, SparseGradientEqualsItsDenseForm) {
  const std::vector<Factory> factories = {
      [] { return std::make_unique<lamb::Lamb>(lamb::LambOptions()); },
      [] { return std::make_unique<adamw::AdamW>(adamw::AdamWOptions()); },
      [] {
        sgd::SgdOptions o;
        o.momentum = 0.9;
        return std::make_unique<sgd::Sgd>(o);
      }};
  for (size_t f = 0; f < factories.size(); ++f) {
    auto run = [&](bool sparse) {
      std::vector<NamedTensor> params = {{"embeddings.word_embeddings.weight", at::ones({5, 3})}};
      auto opt = factories[f]();
      opt->init(params, OptimizerContext{10});
      const at::Tensor indices = at::tensor(std::vector<int64_t>{3, 1, 3});
      const at::Tensor values = at::arange(9, at::kFloat).reshape({3, 3}).sub(4);
      GradientEntry e;
      e.name = params[0].name;
      e.shape = {5, 3};
      e.indices = indices;
      e.values = values;
      if (!sparse) {
        e.dense = e.to_dense();
        e.indices = at::Tensor();
        e.values = at::Tensor();
      }
      for (int step = 0; step < 3; ++step) {
        GradientSet set;
        set.add(e);
        opt->step(set, step);
      }
      return params[0].tensor;
    };
    EXPECT_TRUE(at::allclose(run(true), run(false), 1e-6, 1e-7)) << "optimizer " << f;
  }
}

}  // namespace
}  // namespace bertlab

namespace bertlab {
namespace {

// A NaN in the averaged gradient: every optimizer returns a non-finite norm and leaves the
// parameters and its state alone, so that the host can stop or skip the step.
TEST(Optimizers, ANonFiniteGradientUpdatesNothing) {
  const std::vector<std::function<std::unique_ptr<Optimizer>()>> factories = {
      [] { return std::make_unique<lamb::Lamb>(lamb::LambOptions()); },
      [] { return std::make_unique<adamw::AdamW>(adamw::AdamWOptions()); },
      [] {
        sgd::SgdOptions o;
        o.momentum = 0.9;
        return std::make_unique<sgd::Sgd>(o);
      }};
  for (size_t f = 0; f < factories.size(); ++f) {
    std::vector<NamedTensor> params = make_parameters();
    const std::vector<NamedTensor> before = clone_parameters(params);
    auto opt = factories[f]();
    opt->init(params, OptimizerContext{10});
    auto grads = gradients_at(params, 0);
    grads[1][2] = std::numeric_limits<float>::quiet_NaN();
    GradientSet set = gradient_set(params, grads);
    const StepStats stats = opt->step(set, 3);
    EXPECT_FALSE(std::isfinite(stats.grad_norm)) << f;
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(at::equal(params[i].tensor, before[i].tensor)) << f << " " << params[i].name;
    }
    for (const auto& [name, t] : opt->state_dict()) {
      EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << f << " " << name;
    }
  }
}

}  // namespace
}  // namespace bertlab
