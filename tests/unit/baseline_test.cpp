// gradcheck's regression baselines: the tolerance each field gets from the variant's contract
// (docs/strategy-contracts.md, "Regression baselines"), what a comparison lets through and what
// it catches, and the one-ulp move of the initial weights that stands for another machine.

#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "report/baseline.h"
#include "train/ulp_perturbation.h"

namespace bertlab {
namespace {

BaselineRun three_steps(const std::string& kind) {
  BaselineRun r;
  r.expect = "contract";
  r.contract.kind = kind;
  r.contract.summary = kind;
  r.grad_norms = {1.0, 0.5, 0.25};
  r.losses = {0.7, 0.69, 0.6};
  r.update_norm = 0.9;
  r.param_sum = 600.0;
  r.param_sum_squares = 2000.0;
  return r;
}

nlohmann::json saved(const BaselineRun& run) { return baseline_file("e", 3, {"v"}, {{"v", run}}); }

BaselineCheck check(const nlohmann::json& file, const BaselineRun& now) {
  return check_baseline_file(file, {"v"}, {{"v", now}}, "b.json");
}

TEST(Baseline, ExactRowsAllowTheVariantsOwnTolerance) {
  const BaselineRun run = three_steps("exact");
  const auto file = saved(run);
  const auto& tol = file["variants"]["v"]["tolerance"];
  for (const auto& t : tol["grad_norms"]) {
    EXPECT_EQ(t["rule"], "exact");
    EXPECT_EQ(t["rtol"], 1e-5);
    EXPECT_EQ(t["atol"], 1e-6);
  }
  EXPECT_EQ(tol["param_sum"]["rule"], "exact");
  BaselineRun now = run;
  now.grad_norms[2] *= 1 + 5e-6;  // half the room
  auto c = check(file, now);
  EXPECT_TRUE(c.problems.empty());
  EXPECT_NEAR(c.largest_use, 0.25 * 5e-6 / (1e-6 + 0.25 * 1e-5), 1e-6);
  now.grad_norms[2] = run.grad_norms[2] * (1 + 1e-4);
  c = check(file, now);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find("grad_norms[step 3]"), std::string::npos) << c.problems[0];
}

// ρ = 0.01, α = 0: the norm's room is 2ρ‖mean|g|‖; after the average, 4ρs with s the largest
// ‖mean|g|‖ / ‖g‖; the checksums are not compared.
TEST(Baseline, BoundedRowsAllowTwiceTheBoundAndItsConsequences) {
  BaselineRun run = three_steps("bounded");
  run.contract.rtol = 0.01;
  run.abs_mean_norms = {2.0, 0.5, 0.25};  // s = 2 at step 1
  run.elements = {100, 100, 100};
  const auto file = saved(run);
  const auto& tol = file["variants"]["v"]["tolerance"];
  EXPECT_EQ(tol["grad_norms"][0]["rule"], "bounded");
  EXPECT_NEAR(tol["grad_norms"][0]["atol"].get<double>(), 1e-6 + 2 * 0.01 * 2.0, 1e-12);
  EXPECT_NEAR(tol["grad_norms"][1]["atol"].get<double>(), 1e-6 + 2 * 0.01 * 0.5, 1e-12);
  EXPECT_EQ(tol["losses"][0]["rule"], "exact");  // before any average
  EXPECT_NEAR(tol["losses"][1]["rtol"].get<double>(), 1e-5 + 4 * 0.01 * 2.0, 1e-12);
  EXPECT_NEAR(tol["update_norm"]["rtol"].get<double>(), 1e-5 + 4 * 0.01 * 2.0, 1e-12);
  EXPECT_EQ(tol["param_sum"]["rule"], "not compared");
  BaselineRun now = run;
  now.grad_norms[0] += 0.03;  // within 0.04
  now.param_sum += 10.0;      // not compared
  now.update_norm *= 1.05;    // within 8%
  EXPECT_TRUE(check(file, now).problems.empty());
  now.grad_norms[0] += 0.02;  // 0.05 > 0.04
  EXPECT_EQ(check(file, now).problems.size(), 1u);
}

TEST(Baseline, ExactUntilRowsAreExactBeforeTheirStepOnly) {
  BaselineRun run = three_steps("exact_until");
  run.contract.until_step = 1;
  const auto file = saved(run);
  const auto& tol = file["variants"]["v"]["tolerance"];
  EXPECT_EQ(tol["grad_norms"][0]["rule"], "exact");
  EXPECT_EQ(tol["grad_norms"][1]["rule"], "unbounded");
  EXPECT_EQ(tol["losses"][1]["rule"], "exact");  // computed before step 2's update
  EXPECT_EQ(tol["losses"][2]["rule"], "unbounded");
  BaselineRun now = run;
  now.grad_norms[1] *= 1 + 5e-4;
  EXPECT_TRUE(check(file, now).problems.empty());
  now.grad_norms[0] *= 1 + 5e-4;
  EXPECT_EQ(check(file, now).problems.size(), 1u);
}

TEST(Baseline, DifferRowsKeepTheirVerdictNotTheirDigits) {
  BaselineRun run = three_steps("exact");
  run.expect = "differ";
  run.verdict = {"PASS", {"reference"}, "step 1: sparse gradient"};
  const auto file = saved(run);
  EXPECT_EQ(file["variants"]["v"]["compared"], "verdict");
  EXPECT_FALSE(file["variants"]["v"].contains("grad_norms"));
  BaselineRun now = run;
  now.grad_norms = {9.0, 9.0, 9.0};  // a broken run's digits may go anywhere
  EXPECT_TRUE(check(file, now).problems.empty());
  now.verdict.first_difference = "step 2: parameters";  // the bug shows elsewhere
  ASSERT_EQ(check(file, now).problems.size(), 1u);
  EXPECT_NE(check(file, now).problems[0].find("first difference step 2: parameters; baseline"),
            std::string::npos);
}

TEST(Baseline, AFormatOneFileIsComparedAtTheVariantsTolerance) {
  const nlohmann::json old = nlohmann::json::parse(R"({"experiment": "e", "steps": 3,
      "variants": {"v": {"grad_norms": [1.0, 0.5, 0.25], "losses": [0.7, 0.69, 0.6],
                         "param_sum": 600.0, "param_sum_squares": 2000.0}}})");
  BaselineRun now = three_steps("bounded");
  EXPECT_TRUE(check(old, now).problems.empty());
  now.losses[2] += 1e-3;
  EXPECT_EQ(check(old, now).problems.size(), 1u);
  EXPECT_EQ(check(old, now).machine_there, "not recorded (format 1)");
}

TEST(UlpPerturbation, MovesEveryNonzeroWeightOneUlpAlikeInEveryReplica) {
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  for (int r = 0; r < 2; ++r) {
    torch::manual_seed(7);
    auto linear = std::make_shared<torch::nn::LinearImpl>(64, 32);
    torch::NoGradGuard no_grad;
    linear->bias.zero_();
    models.push_back(linear);
  }
  const at::Tensor before = models[0]->named_parameters()["weight"].clone();
  perturb_by_one_ulp(models, 1);
  const at::Tensor after = models[0]->named_parameters()["weight"];
  const at::Tensor up = at::nextafter(before, at::full_like(before, INFINITY));
  const at::Tensor down = at::nextafter(before, at::full_like(before, -INFINITY));
  EXPECT_TRUE(at::logical_or(after == up, after == down).all().item<bool>());
  const double share_up = (after == up).to(at::kDouble).mean().item<double>();
  EXPECT_GT(share_up, 0.4);
  EXPECT_LT(share_up, 0.6);
  EXPECT_TRUE(at::equal(models[0]->named_parameters()["bias"],
                        at::zeros_like(models[0]->named_parameters()["bias"])));
  for (const auto& p : models[0]->named_parameters()) {
    EXPECT_TRUE(at::equal(p.value(), models[1]->named_parameters()[p.key()])) << p.key();
  }
}

}  // namespace
}  // namespace bertlab
