// Adversarial training: the per-example norms, steps, projections and random starts on
// hand-checkable numbers; the fgm, pgd and freelb plugins (loaded from their library) on an
// objective whose gradient is known; and gradcheck runs proving that thread ranks, process ranks
// and gradient accumulation give one device's update with dropout on, for each plugin.

#include <ATen/ATen.h>
#include <bertlab/adversarial.h>
#include <bertlab/config.h>
#include <bertlab/random.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "runtime/plugin_host.h"
#include "runtime/registry.h"
#include "test_util.h"

namespace bertlab {
namespace {

namespace fs = std::filesystem;
using testing::data_path;
using testing::read_file;
using testing::run_bertlab;
using testing::TempDir;

/// Two examples of one position and two features: example 0's gradient (3, 4), example 1's
/// (0, 2).
at::Tensor known_gradient() { return at::tensor({3.f, 4.f, 0.f, 2.f}).view({2, 1, 2}); }

void expect_close(const at::Tensor& actual, const std::vector<float>& expected) {
  const at::Tensor flat = actual.reshape({-1}).to(at::kFloat).contiguous();
  ASSERT_EQ(flat.numel(), static_cast<int64_t>(expected.size())) << actual;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(flat[static_cast<int64_t>(i)].item<float>(), expected[i], 1e-6) << i << actual;
  }
}

TEST(AdversarialMath, FgmPerturbationIsEpsilonTimesEachExamplesUnitGradient) {
  const at::Tensor g = known_gradient();
  // ‖(3, 4)‖ = 5 and ‖(0, 2)‖ = 2: each example moves by ε along its own direction.
  expect_close(ascent_step(at::zeros_like(g), g, 2.0, PerturbationNorm::kL2, NormScope::kExample),
               {1.2f, 1.6f, 0.0f, 2.0f});
  // unif's batch norm: one norm √29 for both, so example 1's step depends on example 0.
  const float s = 2.0f / std::sqrt(29.0f);
  expect_close(ascent_step(at::zeros_like(g), g, 2.0, PerturbationNorm::kL2, NormScope::kBatch),
               {3 * s, 4 * s, 0.0f, 2 * s});
  // A zero gradient: the norm is clamped at 1e-8, the step stays finite (zero).
  expect_close(perturbation_norms(at::zeros({2, 1, 2}), PerturbationNorm::kL2, NormScope::kExample),
               {1e-8f, 1e-8f});
}

TEST(AdversarialMath, OneFreeLbAscentStepInL2WithProjection) {
  const at::Tensor delta = at::tensor({0.3f, 0.f, 0.f, 0.1f}).view({2, 1, 2});
  // delta + 0.5 · g/‖g‖: (0.6, 0.4) and (0, 0.6); both outside the 0.5 ball, rescaled onto it.
  const at::Tensor stepped =
      ascent_step(delta, known_gradient(), 0.5, PerturbationNorm::kL2, NormScope::kExample);
  expect_close(stepped, {0.6f, 0.4f, 0.0f, 0.6f});
  const float n0 = std::sqrt(0.36f + 0.16f);
  expect_close(project_perturbation(stepped, PerturbationNorm::kL2, 0.5),
               {0.6f * 0.5f / n0, 0.4f * 0.5f / n0, 0.0f, 0.5f});
  // Inside the ball: unchanged; epsilon 0: no projection.
  expect_close(project_perturbation(stepped, PerturbationNorm::kL2, 1.0), {0.6f, 0.4f, 0.f, 0.6f});
  expect_close(project_perturbation(stepped, PerturbationNorm::kL2, 0.0), {0.6f, 0.4f, 0.f, 0.6f});
}

TEST(AdversarialMath, OneFreeLbAscentStepInLinfWithProjection) {
  const at::Tensor delta = at::tensor({0.3f, 0.f, 0.f, 0.1f}).view({2, 1, 2});
  // g / max|g|: (0.75, 1) and (0, 1); delta + 0.5 of it: (0.675, 0.5), (0, 0.6); clamped to 0.55.
  const at::Tensor stepped =
      ascent_step(delta, known_gradient(), 0.5, PerturbationNorm::kLinf, NormScope::kExample);
  expect_close(stepped, {0.675f, 0.5f, 0.0f, 0.6f});
  expect_close(project_perturbation(stepped, PerturbationNorm::kLinf, 0.55),
               {0.55f, 0.5f, 0.0f, 0.55f});
}

DropoutKey key_of(int64_t first_example, int64_t examples) {
  return DropoutKey{99, 3, first_example, examples};
}

TEST(AdversarialMath, RandomStartsArePerExampleMaskedAndWithinTheBall) {
  // Example 5 of the step draws the same start in a batch of 4 from example 2 as alone.
  const at::Tensor mask4 = at::tensor({1.f, 1.f, 1.f, 0.f,   // length 3
                                       1.f, 1.f, 1.f, 1.f,   // 4
                                       1.f, 1.f, 0.f, 0.f,   // 2
                                       1.f, 0.f, 0.f, 0.f})  // 1
                               .view({4, 4});
  for (PerturbationNorm norm : {PerturbationNorm::kL2, PerturbationNorm::kLinf}) {
    const at::Tensor four = random_perturbation(key_of(2, 4), {4, 4, 8}, mask4, norm, 0.3);
    const at::Tensor one =
        random_perturbation(key_of(5, 1), {1, 4, 8}, mask4.narrow(0, 3, 1), norm, 0.3);
    EXPECT_TRUE(at::equal(four.narrow(0, 3, 1), one));
    // Padded positions get none.
    EXPECT_EQ(four[0][3].abs().sum().item<float>(), 0.0f);
    EXPECT_EQ(four[3].narrow(0, 1, 3).abs().sum().item<float>(), 0.0f);
    EXPECT_GT(four[1].abs().sum().item<float>(), 0.0f);
    if (norm == PerturbationNorm::kLinf) {
      EXPECT_LE(four.abs().max().item<float>(), 0.3f);
    } else {
      // uniform(-1, 1) · 0.3 / √(length · hidden): each example's norm is at most 0.3.
      const at::Tensor norms = four.reshape({4, -1}).norm(2, {1});
      EXPECT_LE(norms.max().item<float>(), 0.3f + 1e-6f) << norms;
      EXPECT_GT(norms.min().item<float>(), 0.05f) << norms;
    }
  }
  // Another step or seed draws another start.
  const at::Tensor a = per_example_uniform(key_of(0, 2), kAdversarialInitSite, {2, 8}, -1, 1);
  DropoutKey other = key_of(0, 2);
  other.step = 4;
  EXPECT_FALSE(at::equal(a, per_example_uniform(other, kAdversarialInitSite, {2, 8}, -1, 1)));
  EXPECT_GE(a.min().item<float>(), -1.0f);
  EXPECT_LT(a.max().item<float>(), 1.0f);
}

TEST(AdversarialMath, EachPassDrawsItsOwnDropoutMasksAndPassZeroThoseOfPlainTraining) {
  DropoutKey plain = key_of(0, 2);
  DropoutKey second = plain;
  second.pass = 1;
  PerExampleDropoutScope s0(plain);
  const int64_t site0 = s0.next_site();
  EXPECT_EQ(site0, 0);
  PerExampleDropoutScope s1(second);
  EXPECT_EQ(s1.next_site(), kSitesPerPass);
  EXPECT_FALSE(at::equal(per_example_dropout_mask(plain, 0, {2, 64}, 0.5),
                         per_example_dropout_mask(second, kSitesPerPass, {2, 64}, 0.5)));
}

/// A linear objective Σ c·(w + delta) over two examples of two positions and two features,
/// whose gradient with respect to delta is c on every pass: the plugins' deltas are known.
struct LinearObjective {
  at::Tensor c = at::tensor({3.f, 4.f, 0.f, 0.f, 0.f, 2.f, 1.f, 0.f}).view({2, 2, 2});
  at::Tensor w = at::zeros({2, 2, 2}).requires_grad_(true);
  std::vector<at::Tensor> deltas;  ///< what each pass got (undefined: none)
  std::vector<int64_t> passes;

  AdversarialBatch batch() {
    AdversarialBatch b;
    b.objective = [this](const at::Tensor& delta, int64_t pass) {
      deltas.push_back(delta.defined() ? delta.detach().clone() : at::Tensor());
      passes.push_back(pass);
      return (c * (delta.defined() ? w + delta : w)).sum();
    };
    b.backward = [](const at::Tensor& objective) { objective.backward(); };
    b.input_mask = at::ones({2, 2});
    b.hidden_size = 2;
    b.key = key_of(0, 2);
    b.global_batch = 2;
    return b;
  }
};

std::unique_ptr<Adversarial> make(const std::string& name,
                                  std::map<std::string, OptionValue> options) {
  const Component* c =
      bertlab::testing::builtin_plugins().registry().find(ComponentKind::kAdversarial, name);
  EXPECT_NE(c, nullptr) << name;
  return c->adversarial_factory(ConfigView("adversarial", c->spec.options, std::move(options)));
}

TEST(AdversarialPlugins, FgmAddsTheLossAtEpsilonAlongEachExamplesGradient) {
  LinearObjective f;
  const double logged = make("fgm", {{"epsilon", 2.0}})->forward_backward(f.batch());
  ASSERT_EQ(f.passes, (std::vector<int64_t>{0, 1}));
  expect_close(f.deltas[0], std::vector<float>(8, 0.0f));
  // Example 0's gradient (3, 4, 0, 0) has norm 5, example 1's (0, 2, 1, 0) √5.
  const float r5 = std::sqrt(5.0f);
  expect_close(f.deltas[1], {1.2f, 1.6f, 0.f, 0.f, 0.f, 4.f / r5, 2.f / r5, 0.f});
  // Clean and adversarial losses both reach the parameters: 2c.
  EXPECT_TRUE(at::allclose(f.w.grad(), 2 * f.c));
  EXPECT_EQ(logged, 0.0);  // the clean loss at w = 0
}

TEST(AdversarialPlugins, PgdStepsProjectsAndKeepsTheCleanAndTheLastGradients) {
  LinearObjective f;
  make("pgd", {{"steps", int64_t{2}}, {"alpha", 0.3}, {"epsilon", 0.5}})
      ->forward_backward(f.batch());
  ASSERT_EQ(f.passes, (std::vector<int64_t>{0, 1, 2}));
  // Step 1: 0.3 along each unit gradient; step 2: 0.6, projected onto the 0.5 ball.
  const float r5 = std::sqrt(5.0f);
  expect_close(f.deltas[1], {0.18f, 0.24f, 0.f, 0.f, 0.f, 0.6f / r5, 0.3f / r5, 0.f});
  expect_close(f.deltas[2], {0.3f, 0.4f, 0.f, 0.f, 0.f, 1.0f / r5, 0.5f / r5, 0.f});
  // The intermediate pass moved delta only: the parameters got the clean and the last pass.
  EXPECT_TRUE(at::allclose(f.w.grad(), 2 * f.c));
}

TEST(AdversarialPlugins, FreeLbAveragesTheParameterGradientsOverItsSteps) {
  LinearObjective f;
  const double logged = make("freelb", {{"steps", int64_t{3}}, {"alpha", 0.4}, {"epsilon", 0.5}})
                            ->forward_backward(f.batch());
  // FreeLB's passes share the first one's dropout masks (its dp_masks).
  ASSERT_EQ(f.passes, (std::vector<int64_t>{0, 0, 0}));
  expect_close(f.deltas[0], std::vector<float>(8, 0.0f));
  const float r5 = std::sqrt(5.0f);
  expect_close(f.deltas[1], {0.24f, 0.32f, 0.f, 0.f, 0.f, 0.8f / r5, 0.4f / r5, 0.f});
  expect_close(f.deltas[2], {0.3f, 0.4f, 0.f, 0.f, 0.f, 1.0f / r5, 0.5f / r5, 0.f});
  // Each pass adds c / 3.
  EXPECT_TRUE(at::allclose(f.w.grad(), f.c));
  // The mean of the three losses: (0 + c·δ1 + c·δ2) / 3.
  const double l1 = (f.c * f.deltas[1]).sum().item<double>();
  const double l2 = (f.c * f.deltas[2]).sum().item<double>();
  EXPECT_NEAR(logged, (l1 + l2) / 3, 1e-5);
  LinearObjective own;
  make("freelb", {{"steps", int64_t{3}}, {"dropout_masks", std::string("per_pass")}})
      ->forward_backward(own.batch());
  EXPECT_EQ(own.passes, (std::vector<int64_t>{0, 1, 2}));
}

// ---- gradcheck: N replicas and accumulation give one device's update ----

fs::path adversarial_file() { return data_path("experiments/adversarial_classifier.toml"); }

/// gradcheck of the thread-rank and accumulation variants with `sets`; every one must match.
void expect_thread_ranks_match(const std::vector<std::string>& sets) {
  TempDir dir;
  std::vector<std::string> args = {"gradcheck", adversarial_file().string(), "--output-dir",
                                   dir.path().string()};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  const std::vector<std::string> variants = {"single",
                                             "mirrored-2",
                                             "sparse-allgather-2",
                                             "mirrored-4",
                                             "sparse-allgather-4",
                                             "accumulate-2",
                                             "mirrored-2-accumulate-2"};
  for (const auto& v : variants) {
    args.push_back("--variant");
    args.push_back(v);
  }
  const auto r = run_bertlab(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto json =
      nlohmann::json::parse(read_file(dir / "adversarial-classifier" / "gradcheck.json"));
  for (const auto& v : variants) {
    EXPECT_TRUE(json["variants"][v]["match"].get<bool>()) << v << "\n" << r.out;
  }
}

// experiments/adversarial.toml against its committed baseline: FreeLB on 1, 2 and 4 replicas
// matches; unif's batch-wide norm and first-replica indices differ, and the note names the norm.
// The weights are moved by one ulp (--perturb-ulp), so the baseline holds where rounding differs.
TEST(Adversarial, TheAdversarialExperimentMeetsEveryExpectationAndItsBaseline) {
  TempDir dir;
  const fs::path experiments = fs::path(BERTLAB_SOURCE_DIR) / "experiments";
  const auto r = run_bertlab({"gradcheck", (experiments / "adversarial.toml").string(),
                              "--output-dir", dir.path().string(), "--perturb-ulp", "1",
                              "--baseline", (experiments / "adversarial.baseline.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every variant unchanged; largest use of a tolerance"), std::string::npos)
      << r.out;
  const auto json = nlohmann::json::parse(read_file(dir / "adversarial" / "gradcheck.json"));
  const auto& v = json["variants"];
  for (const char* name :
       {"single", "mirrored-2", "sparse-allgather-2", "mirrored-4", "sparse-allgather-4"}) {
    EXPECT_TRUE(v[name]["match"].get<bool>()) << name;
    EXPECT_EQ(v[name]["result"], "PASS") << name;
  }
  for (const char* name : {"batch-norm-2", "first-replica-indices-2"}) {
    EXPECT_FALSE(v[name]["match"].get<bool>()) << name;
    EXPECT_EQ(v[name]["result"], "PASS") << name;  // expected to differ, and it does
  }
  EXPECT_NE(r.out.find("`batch-norm-2`, besides the averaging, differs from the reference in: "
                       "adversarial.norm_scope = \"batch\" (reference \"example\")"),
            std::string::npos)
      << r.out;
}

TEST(Adversarial, FgmThreadRanksAndAccumulationMatchOneDevice) {
  expect_thread_ranks_match({"adversarial.plugin=fgm"});
}
TEST(Adversarial, PgdThreadRanksAndAccumulationMatchOneDevice) {
  expect_thread_ranks_match({"adversarial.plugin=pgd"});
}
TEST(Adversarial, FreeLbL2ThreadRanksAndAccumulationMatchOneDevice) {
  expect_thread_ranks_match({"adversarial.init_magnitude=0.3"});
}
TEST(Adversarial, FreeLbLinfThreadRanksAndAccumulationMatchOneDevice) {
  expect_thread_ranks_match({"adversarial.norm=linf", "adversarial.init_magnitude=0.05"});
}

/// Two processes through `bertlab launch` against one device, with `set`.
void expect_process_ranks_match(const std::string& set) {
  TempDir dir;
  const auto r = run_bertlab({"launch", "--nproc", "2", "--", BERTLAB_EXECUTABLE, "gradcheck",
                              adversarial_file().string(), "--variant", "single", "--variant",
                              "env-2", "--set", set, "--output-dir", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto json =
      nlohmann::json::parse(read_file(dir / "adversarial-classifier" / "gradcheck.json"));
  EXPECT_TRUE(json["variants"]["env-2"]["match"].get<bool>()) << r.out;
}

TEST(Adversarial, FreeLbProcessRanksMatchOneDevice) {
  expect_process_ranks_match("adversarial.init_magnitude=0.3");
}
TEST(Adversarial, FgmProcessRanksMatchOneDevice) {
  expect_process_ranks_match("adversarial.plugin=fgm");
}
TEST(Adversarial, PgdProcessRanksMatchOneDevice) {
  expect_process_ranks_match("adversarial.plugin=pgd");
}

TEST(Adversarial, AGlobalBatchInitIsAConfigurationErrorOnTwoReplicas) {
  TempDir dir;
  const auto r =
      run_bertlab({"run", adversarial_file().string(), "--variant", "mirrored-2", "--set",
                   "adversarial.emulate=global_batch_init", "--output-dir", dir.path().string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("[adversarial] the perturbation added to the word embeddings' output has "
                       "shape [8, 32, 32], and this replica's output has shape [4, 32, 32]"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
}

TEST(Adversarial, KeysWithoutAPluginAreRefusedWithTheirLine) {
  const auto r =
      run_bertlab({"validate", adversarial_file().string(), "--set", "adversarial.plugin=none"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("plugin is \"none\"; set plugin to one of: fgm, freelb, pgd"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("adversarial_classifier.toml:35"), std::string::npos)
      << r.err;  // the line of `epsilon = 0.5`
}

TEST(Adversarial, PluginsListsTheThreeAdversarialComponents) {
  const auto r = run_bertlab({"plugins"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"fgm", "pgd", "freelb"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("adversarial"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace bertlab
