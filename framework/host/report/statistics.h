#pragma once
// Statistics for comparing an experiment's variants across random seeds: a summary of one metric
// over seeds (mean, sample standard deviation, 95% t-interval) and a paired comparison of a
// variant against the reference (paired t-test, t-interval and percentile bootstrap of the mean
// difference). Every quantity here is a plain double so that the module stays free of torch.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bertlab {

/// Two-sided significance level of compare_paired()'s verdict; the matching intervals are 95%.
inline constexpr double kSignificanceLevel = 0.05;

/// Fewest paired seeds for which compare_paired() reports a bootstrap interval: with fewer, the
/// resamples take so few distinct values that the percentiles mean little.
inline constexpr int64_t kMinBootstrapSeeds = 5;

/// Summary of one metric over seeds. Non-finite values (NaN, +-inf: a diverged or missing run)
/// are left out, and `n` counts only the finite ones, so a caller can tell how many were dropped.
struct SampleSummary {
  int64_t n = 0;                                           ///< finite values summarized
  double mean = std::numeric_limits<double>::quiet_NaN();  ///< NaN when n == 0
  /// Sample standard deviation (denominator n - 1); NaN when n < 2.
  double stddev = std::numeric_limits<double>::quiet_NaN();
  /// Half-width of the 95% t-interval of the mean, t_{0.975, n-1} * stddev / sqrt(n);
  /// NaN when n < 2.
  double ci95 = std::numeric_limits<double>::quiet_NaN();
  double min = std::numeric_limits<double>::quiet_NaN();  ///< NaN when n == 0
  double max = std::numeric_limits<double>::quiet_NaN();  ///< NaN when n == 0
};

/// Summary of `values` (one per seed), leaving out the non-finite ones.
SampleSummary summarize(const std::vector<double>& values);

/// What a paired comparison concludes about a variant against the reference.
enum class Verdict {
  kBetter,                   ///< p < kSignificanceLevel, and the difference goes the good way
  kWorse,                    ///< p < kSignificanceLevel, and the difference goes the bad way
  kNoSignificantDifference,  ///< p >= kSignificanceLevel
  kNotEnoughSeeds,           ///< fewer than 2 paired seeds: no test is possible
};

/// "better", "worse", "no significant difference" or "n/a (fewer than 2 seeds)".
const char* to_string(Verdict verdict);

/// A variant against the reference, paired by seed: variant[i] and reference[i] come from runs
/// with the same seed, so the test is on the differences d[i] = variant[i] - reference[i].
struct PairedComparison {
  int64_t n = 0;  ///< pairs used: those whose difference is finite
  /// Mean of d; NaN when n == 0.
  double mean_delta = std::numeric_limits<double>::quiet_NaN();
  /// Half-width of the 95% t-interval of the mean difference; NaN when n < 2.
  double ci95 = std::numeric_limits<double>::quiet_NaN();
  /// Two-sided paired t-test of "the mean difference is 0"; NaN when n < 2.
  double p_value = std::numeric_limits<double>::quiet_NaN();
  /// Percentile bootstrap 95% interval of the mean difference (lower, upper); only when
  /// n >= kMinBootstrapSeeds.
  std::optional<std::pair<double, double>> bootstrap_ci95;
  /// From p_value < kSignificanceLevel, the sign of mean_delta and whether higher is better.
  Verdict verdict = Verdict::kNotEnoughSeeds;
};

/// Compares `variant` with `reference`, seed by seed. The rules:
/// - The two must have the same length (one value per seed), else bertlab::Error.
/// - A pair whose difference is not finite (either value NaN or infinite: a diverged run) is
///   left out, so that the remaining pairs still share their seeds; `n` counts the pairs kept.
/// - With n < 2 there is no variance to test against: verdict kNotEnoughSeeds, p_value and ci95
///   NaN (mean_delta is still the single difference when n == 1).
/// - When every difference is the same (zero spread), the t statistic is 0/0 or x/0: the
///   difference is then deterministic across seeds, so p_value = 1 and ci95 = 0 when it is 0
///   (no significant difference), and p_value = 0 and ci95 = 0 when it is not (better or
///   worse). The bootstrap interval is [d, d].
/// - The bootstrap (n >= kMinBootstrapSeeds) draws `bootstrap_resamples` resamples of the n
///   differences with replacement and takes the mean of each. It is reproducible across
///   standard libraries for a given `bootstrap_seed`: std::mt19937_64 (whose output the
///   standard fixes) seeded with it, and each index drawn as ((rng() >> 32) * n) >> 32, the
///   multiply-shift map of the top 32 bits onto [0, n) (bias below n / 2^32), rather than
///   std::uniform_int_distribution, whose algorithm each library chooses. The interval is the
///   nearest-rank percentiles of the sorted means: ranks ceil(0.025 * B) and ceil(0.975 * B)
///   (1-based) of the B resample means, e.g. the 250th and 9750th of 10000.
/// `bootstrap_resamples` must be >= 1, else bertlab::Error.
PairedComparison compare_paired(const std::vector<double>& variant,
                                const std::vector<double>& reference, bool higher_is_better,
                                uint64_t bootstrap_seed = 0, int bootstrap_resamples = 10000);

/// Whether a larger value of the metric is better. Names containing "loss", "perplexity",
/// "error" or "time" (e.g. final_loss, eval_perplexity, error_rate, wall_time_s), in any case,
/// are lower-is-better; every other metric (accuracy, f1, exact_match, examples_per_second, ...)
/// is higher-is-better.
bool higher_is_better(const std::string& metric_name);

}  // namespace bertlab
