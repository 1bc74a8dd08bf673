// The seed statistics of the report: summaries with t-intervals, the paired t-test against
// closed forms of the t distribution (not against Boost, which the module itself uses), the
// percentile bootstrap, the zero-spread and too-few-seeds cases, and which metrics are better
// higher.

#include <bertlab/error.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "report/statistics.h"

namespace bertlab {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const double kPi = std::acos(-1.0);

// t_{0.975, df} from tables (and from the closed forms below for df 1 and 2).
constexpr double kT975Df3 = 3.182446305284263;
constexpr double kT975Df4 = 2.7764451051977987;

// Closed forms of the t distribution for small df, to check the module independently.
// df = 1 is the Cauchy distribution: quantile(p) = tan(pi * (p - 1/2)).
double t_quantile_df1(double p) { return std::tan(kPi * (p - 0.5)); }
// df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)), so quantile(p) = (2p - 1) / sqrt(2 p (1 - p)) and
// the two-sided p-value is 2 (1 - F(|t|)) = 1 - |t| / sqrt(2 + t^2).
double t_quantile_df2(double p) { return (2 * p - 1) / std::sqrt(2 * p * (1 - p)); }
double two_sided_p_df2(double t) { return 1 - std::fabs(t) / std::sqrt(2 + t * t); }
// df = 4: with x = t / sqrt(4 + t^2), F(t) = 1/2 + (3/4) x - (1/4) x^3 (its derivative in t is
// 12 / (4 + t^2)^(5/2), the df-4 density), so the two-sided p-value is 1 - (3/2) x + (1/2) x^3.
double two_sided_p_df4(double t) {
  const double x = std::fabs(t) / std::sqrt(4 + t * t);
  return 1 - 1.5 * x + 0.5 * x * x * x;
}

void expect_relative(double actual, double expected, double tolerance = 1e-9) {
  EXPECT_NEAR(actual, expected, tolerance * std::fabs(expected)) << "expected " << expected;
}

TEST(Statistics, ClosedFormsMatchTables) {
  // The references themselves, against table values: t_{0.975,1} = 12.706..., t_{0.975,2} =
  // 4.303..., and the df-4 p-value is 0.05 exactly at t_{0.975,4}.
  EXPECT_NEAR(t_quantile_df1(0.975), 12.706204736174707, 1e-9);
  EXPECT_NEAR(t_quantile_df2(0.975), 4.302652729749464, 1e-12);
  EXPECT_NEAR(two_sided_p_df2(t_quantile_df2(0.975)), 0.05, 1e-12);
  EXPECT_NEAR(two_sided_p_df4(kT975Df4), 0.05, 1e-12);
}

TEST(Statistics, SummarizeFourValues) {
  const SampleSummary s = summarize({1, 2, 3, 4});
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  // Deviations -1.5, -0.5, 0.5, 1.5: squares sum to 5, over n - 1 = 3.
  const double stddev = std::sqrt(5.0 / 3.0);
  expect_relative(s.stddev, stddev, 1e-14);
  // t_{0.975,3} * stddev / sqrt(4).
  expect_relative(s.ci95, kT975Df3 * stddev / 2);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 4);
}

TEST(Statistics, SummarizeLeavesOutNonFiniteValues) {
  const SampleSummary s = summarize({3, kNaN, 1, kInf, -kInf});
  EXPECT_EQ(s.n, 2);
  EXPECT_DOUBLE_EQ(s.mean, 2);
  // Deviations -1, 1: squares sum to 2, over n - 1 = 1.
  expect_relative(s.stddev, std::sqrt(2.0), 1e-14);
  // t_{0.975,1} * sqrt(2) / sqrt(2).
  expect_relative(s.ci95, t_quantile_df1(0.975));
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
}

TEST(Statistics, SummarizeOneValueAndNone) {
  const SampleSummary one = summarize({0.75});
  EXPECT_EQ(one.n, 1);
  EXPECT_EQ(one.mean, 0.75);
  EXPECT_EQ(one.min, 0.75);
  EXPECT_EQ(one.max, 0.75);
  EXPECT_TRUE(std::isnan(one.stddev));
  EXPECT_TRUE(std::isnan(one.ci95));

  for (const std::vector<double>& values : {std::vector<double>{}, std::vector<double>{kNaN}}) {
    const SampleSummary none = summarize(values);
    EXPECT_EQ(none.n, 0);
    EXPECT_TRUE(std::isnan(none.mean));
    EXPECT_TRUE(std::isnan(none.stddev));
    EXPECT_TRUE(std::isnan(none.ci95));
    EXPECT_TRUE(std::isnan(none.min));
    EXPECT_TRUE(std::isnan(none.max));
  }
}

TEST(Statistics, PairedTestOnThreeSeeds) {
  // d = {0.02, 0.01, 0.03}: mean 0.02, deviations 0, -0.01, 0.01, so sd = sqrt(2e-4 / 2) = 0.01
  // and t = 0.02 / (0.01 / sqrt(3)) = 2 sqrt(3), with df 2: p = 1 - sqrt(6/7) = 0.0742.
  const PairedComparison c = compare_paired({0.80, 0.82, 0.85}, {0.78, 0.81, 0.82}, true);
  EXPECT_EQ(c.n, 3);
  expect_relative(c.mean_delta, 0.02);
  expect_relative(c.p_value, two_sided_p_df2(2 * std::sqrt(3.0)));
  expect_relative(c.p_value, 0.07417990022744858);
  expect_relative(c.ci95, t_quantile_df2(0.975) * 0.01 / std::sqrt(3.0));
  EXPECT_EQ(c.verdict, Verdict::kNoSignificantDifference);
  EXPECT_FALSE(c.bootstrap_ci95.has_value());  // 3 < kMinBootstrapSeeds
}

TEST(Statistics, PairedTestDoesNotDependOnScale) {
  // The three-seed differences times 1e302 and 1e-198: the deviations' squares would overflow
  // and underflow, but t, and so p, is the same 2 sqrt(3) as at any scale.
  const double p = two_sided_p_df2(2 * std::sqrt(3.0));
  for (double scale : {1e302, 1e-198}) {
    const PairedComparison c = compare_paired({2 * scale, scale, 3 * scale}, {0, 0, 0}, true);
    expect_relative(c.mean_delta, 2 * scale);
    expect_relative(c.p_value, p);
    expect_relative(c.ci95, t_quantile_df2(0.975) * scale / std::sqrt(3.0));
  }
}

TEST(Statistics, PairedTestLeavesOutNonFinitePairs) {
  // The three-seed case with a diverged seed (NaN on one side, inf on the other) in between.
  const PairedComparison c =
      compare_paired({0.80, kNaN, 0.82, 0.5, 0.85}, {0.78, 0.5, 0.81, kInf, 0.82}, true);
  EXPECT_EQ(c.n, 3);
  expect_relative(c.mean_delta, 0.02);
  expect_relative(c.p_value, two_sided_p_df2(2 * std::sqrt(3.0)));
}

// Five seeds, d = {0.02, 0.03, 0.04, 0.03, 0.03}: mean 0.03, deviations -0.01, 0, 0.01, 0, 0, so
// sd = sqrt(2e-4 / 4) and the standard error sd / sqrt(5) = sqrt(1e-5); t = 0.03 / sqrt(1e-5) =
// 3 sqrt(10) = 9.49 > t_{0.975,4} = 2.776, df 4.
const std::vector<double> kReference = {0.70, 0.72, 0.71, 0.69, 0.73};
const std::vector<double> kVariant = {0.72, 0.75, 0.75, 0.72, 0.76};

TEST(Statistics, PairedTestOnFiveSeedsIsSignificant) {
  const PairedComparison c = compare_paired(kVariant, kReference, true);
  EXPECT_EQ(c.n, 5);
  expect_relative(c.mean_delta, 0.03);
  const double t = 3 * std::sqrt(10.0);
  expect_relative(c.p_value, two_sided_p_df4(t), 1e-8);
  EXPECT_LT(c.p_value, 0.05);
  expect_relative(c.ci95, kT975Df4 * std::sqrt(1e-5));
  // A significant t-test and a 95% t-interval that excludes 0 go together.
  EXPECT_GT(c.mean_delta - c.ci95, 0);
  EXPECT_EQ(c.verdict, Verdict::kBetter);

  // The same numbers, for a metric where lower is better, or with the sides swapped.
  EXPECT_EQ(compare_paired(kVariant, kReference, false).verdict, Verdict::kWorse);
  const PairedComparison swapped = compare_paired(kReference, kVariant, true);
  expect_relative(swapped.mean_delta, -0.03);
  expect_relative(swapped.p_value, c.p_value, 1e-12);
  EXPECT_EQ(swapped.verdict, Verdict::kWorse);
  EXPECT_EQ(compare_paired(kReference, kVariant, false).verdict, Verdict::kBetter);
}

TEST(Statistics, BootstrapIsDeterministicAndCoversTheMean) {
  const PairedComparison a = compare_paired(kVariant, kReference, true, 42);
  const PairedComparison b = compare_paired(kVariant, kReference, true, 42);
  ASSERT_TRUE(a.bootstrap_ci95.has_value());
  ASSERT_TRUE(b.bootstrap_ci95.has_value());
  EXPECT_EQ(*a.bootstrap_ci95, *b.bootstrap_ci95);
  const auto [lower, upper] = *a.bootstrap_ci95;
  EXPECT_LE(lower, a.mean_delta);
  EXPECT_GE(upper, a.mean_delta);
  EXPECT_LT(lower, upper);
  // Every resample mean lies between the smallest and the largest difference.
  EXPECT_GE(lower, 0.02 - 1e-12);
  EXPECT_LE(upper, 0.04 + 1e-12);
  // Another seed still gives a valid interval around the mean.
  const auto [lower7, upper7] = *compare_paired(kVariant, kReference, true, 7).bootstrap_ci95;
  EXPECT_LE(lower7, a.mean_delta);
  EXPECT_GE(upper7, a.mean_delta);
}

TEST(Statistics, BootstrapNeedsFiveSeedsAndOneResample) {
  const std::vector<double> four_reference(kReference.begin(), kReference.begin() + 4);
  const std::vector<double> four_variant(kVariant.begin(), kVariant.begin() + 4);
  EXPECT_FALSE(compare_paired(four_variant, four_reference, true).bootstrap_ci95.has_value());
  // One resample: both nearest ranks, ceil(0.025) and ceil(0.975), are 1.
  const auto [lower, upper] = *compare_paired(kVariant, kReference, true, 0, 1).bootstrap_ci95;
  EXPECT_EQ(lower, upper);
  EXPECT_THROW(compare_paired(kVariant, kReference, true, 0, 0), Error);
}

TEST(Statistics, ConstantDifferenceIsDeterministic) {
  // d = 0.5 on every seed (exact in binary): no spread, so p = 0 and the interval is [d, d].
  const std::vector<double> reference = {1, 2, 3, 4, 5};
  const std::vector<double> variant = {1.5, 2.5, 3.5, 4.5, 5.5};
  const PairedComparison c = compare_paired(variant, reference, true);
  EXPECT_EQ(c.n, 5);
  EXPECT_EQ(c.mean_delta, 0.5);
  EXPECT_EQ(c.ci95, 0);
  EXPECT_EQ(c.p_value, 0);
  EXPECT_EQ(c.verdict, Verdict::kBetter);
  ASSERT_TRUE(c.bootstrap_ci95.has_value());
  EXPECT_EQ(c.bootstrap_ci95->first, 0.5);
  EXPECT_EQ(c.bootstrap_ci95->second, 0.5);
  EXPECT_EQ(compare_paired(variant, reference, false).verdict, Verdict::kWorse);
  EXPECT_EQ(compare_paired(reference, variant, false).verdict, Verdict::kBetter);
}

TEST(Statistics, IdenticalRunsShowNoDifference) {
  const std::vector<double> values = {0.81, 0.83, 0.80};
  const PairedComparison c = compare_paired(values, values, true);
  EXPECT_EQ(c.n, 3);
  EXPECT_EQ(c.mean_delta, 0);
  EXPECT_EQ(c.ci95, 0);
  EXPECT_EQ(c.p_value, 1);
  EXPECT_EQ(c.verdict, Verdict::kNoSignificantDifference);
}

TEST(Statistics, FewerThanTwoSeedsCannotBeTested) {
  const PairedComparison one = compare_paired({0.9}, {0.8}, true);
  EXPECT_EQ(one.n, 1);
  expect_relative(one.mean_delta, 0.1);
  EXPECT_TRUE(std::isnan(one.p_value));
  EXPECT_TRUE(std::isnan(one.ci95));
  EXPECT_FALSE(one.bootstrap_ci95.has_value());
  EXPECT_EQ(one.verdict, Verdict::kNotEnoughSeeds);

  const PairedComparison none = compare_paired({}, {}, true);
  EXPECT_EQ(none.n, 0);
  EXPECT_TRUE(std::isnan(none.mean_delta));
  EXPECT_EQ(none.verdict, Verdict::kNotEnoughSeeds);
  // Two seeds, one of them diverged: one pair is left.
  EXPECT_EQ(compare_paired({0.9, kNaN}, {0.8, 0.8}, true).verdict, Verdict::kNotEnoughSeeds);
}

TEST(Statistics, MismatchedLengthsAreRefused) {
  try {
    compare_paired({0.8, 0.81, 0.82}, {0.79, 0.8}, true);
    FAIL() << "expected bertlab::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("3 values for the variant"), std::string::npos) << message;
    EXPECT_NE(message.find("2 for the reference"), std::string::npos) << message;
  }
}

TEST(Statistics, VerdictNames) {
  EXPECT_STREQ(to_string(Verdict::kBetter), "better");
  EXPECT_STREQ(to_string(Verdict::kWorse), "worse");
  EXPECT_STREQ(to_string(Verdict::kNoSignificantDifference), "no significant difference");
  EXPECT_STREQ(to_string(Verdict::kNotEnoughSeeds), "n/a (fewer than 2 seeds)");
}

TEST(Statistics, WhichMetricsAreBetterHigher) {
  for (const char* name : {"loss", "final_loss", "eval_loss", "perplexity", "eval_perplexity",
                           "error_rate", "wall_time_s", "step_time", "Final_Loss"}) {
    EXPECT_FALSE(higher_is_better(name)) << name;
  }
  for (const char* name :
       {"accuracy", "f1", "exact_match", "examples_per_second", "matthews_corr", "pearson"}) {
    EXPECT_TRUE(higher_is_better(name)) << name;
  }
}

}  // namespace
}  // namespace bertlab
