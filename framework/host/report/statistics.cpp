#include "report/statistics.h"

#include <bertlab/error.h>

#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

namespace bertlab {
namespace {

// The upper end of the two-sided 95% intervals: 0.975.
constexpr double kUpperQuantile = 1.0 - kSignificanceLevel / 2;
// The bootstrap percentiles, 2.5% and 97.5%, in thousandths, so that their nearest ranks
// ceil(p * B) are computed in integers, free of rounding.
constexpr int64_t kLowerPermille = 25;
constexpr int64_t kUpperPermille = 975;

// Index draws take the top 32 bits of a 64-bit output, so (bits * n) fits in 64 bits only for
// n below 2^32.
constexpr uint64_t kMaxBootstrapSize = uint64_t{1} << 32;

// t_{0.975, df}: the multiplier of the standard error in a 95% t-interval.
double t_quantile_975(int64_t df) {
  const boost::math::students_t_distribution<double> dist(static_cast<double>(df));
  return boost::math::quantile(dist, kUpperQuantile);
}

// Two-sided p-value of a t statistic with `df` degrees of freedom: 2 * P(T > |t|), through the
// complement so that small p-values keep their precision.
double two_sided_p(double t, int64_t df) {
  const boost::math::students_t_distribution<double> dist(static_cast<double>(df));
  return 2.0 * boost::math::cdf(boost::math::complement(dist, std::fabs(t)));
}

double mean_of(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

// Sample standard deviation (n - 1 denominator) around `mean`. Two passes rather than the sum of
// squares, which cancels badly when the spread is small against the mean (accuracies), and the
// deviations scaled by the largest one, as hypot does, so that their squares neither overflow
// nor underflow: a spread of 1e-200 must not read as zero spread.
double sample_stddev(const std::vector<double>& values, double mean) {
  double scale = 0.0;
  for (double v : values) scale = std::max(scale, std::fabs(v - mean));
  if (scale == 0.0) return 0.0;
  double squares = 0.0;
  for (double v : values) squares += ((v - mean) / scale) * ((v - mean) / scale);
  return scale * std::sqrt(squares / static_cast<double>(values.size() - 1));
}

Verdict verdict_for(double p_value, double mean_delta, bool higher_is_better) {
  if (!(p_value < kSignificanceLevel)) return Verdict::kNoSignificantDifference;
  return (mean_delta > 0) == higher_is_better ? Verdict::kBetter : Verdict::kWorse;
}

// The 1-based nearest rank of the `permille`-th thousandth of `count` sorted values:
// ceil(permille * count / 1000), at least 1.
int64_t nearest_rank(int64_t permille, int64_t count) {
  return std::max<int64_t>(1, (permille * count + 999) / 1000);
}

// Percentile bootstrap of the mean of `deltas` (see compare_paired() for the exact rule).
std::pair<double, double> bootstrap_mean_ci95(const std::vector<double>& deltas, uint64_t seed,
                                              int resamples) {
  const uint64_t n = deltas.size();
  BERTLAB_CHECK(n < kMaxBootstrapSize, "the bootstrap takes fewer than 2^32 seeds, got {}", n);
  std::mt19937_64 rng(seed);
  std::vector<double> means(static_cast<size_t>(resamples));
  for (double& mean : means) {
    double sum = 0.0;
    for (uint64_t i = 0; i < n; ++i) sum += deltas[((rng() >> 32) * n) >> 32];
    mean = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  const int64_t count = resamples;
  return {means[nearest_rank(kLowerPermille, count) - 1],
          means[nearest_rank(kUpperPermille, count) - 1]};
}

}  // namespace

SampleSummary summarize(const std::vector<double>& values) {
  std::vector<double> finite;
  finite.reserve(values.size());
  for (double v : values) {
    if (std::isfinite(v)) finite.push_back(v);
  }
  SampleSummary s;
  s.n = static_cast<int64_t>(finite.size());
  if (finite.empty()) return s;
  s.mean = mean_of(finite);
  const auto [min, max] = std::minmax_element(finite.begin(), finite.end());
  s.min = *min;
  s.max = *max;
  if (s.n < 2) return s;
  s.stddev = sample_stddev(finite, s.mean);
  s.ci95 = t_quantile_975(s.n - 1) * s.stddev / std::sqrt(static_cast<double>(s.n));
  return s;
}

const char* to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kBetter:
      return "better";
    case Verdict::kWorse:
      return "worse";
    case Verdict::kNoSignificantDifference:
      return "no significant difference";
    case Verdict::kNotEnoughSeeds:
      return "n/a (fewer than 2 seeds)";
  }
  return "unknown verdict";
}

PairedComparison compare_paired(const std::vector<double>& variant,
                                const std::vector<double>& reference, bool higher_is_better,
                                uint64_t bootstrap_seed, int bootstrap_resamples) {
  BERTLAB_CHECK(variant.size() == reference.size(),
                "a paired comparison needs one value per seed on both sides, got {} values for "
                "the variant and {} for the reference; pass the runs of the same seeds",
                variant.size(), reference.size());
  BERTLAB_CHECK(bootstrap_resamples >= 1, "bootstrap_resamples must be >= 1, got {}",
                bootstrap_resamples);
  std::vector<double> deltas;  // [pair kept]
  deltas.reserve(variant.size());
  for (size_t i = 0; i < variant.size(); ++i) {
    const double d = variant[i] - reference[i];
    if (std::isfinite(d)) deltas.push_back(d);
  }
  PairedComparison c;
  c.n = static_cast<int64_t>(deltas.size());
  if (deltas.empty()) return c;
  const bool constant =
      std::all_of(deltas.begin(), deltas.end(), [&](double d) { return d == deltas.front(); });
  // A constant difference is taken as is: summing n copies and dividing by n can round away
  // from it, and the rounding residue would then pose as a (huge-t) spread.
  c.mean_delta = constant ? deltas.front() : mean_of(deltas);
  if (c.n < 2) return c;
  // Zero spread: every difference is the same, so t would be 0/0 or x/0. The difference is then
  // deterministic across seeds: certain when it is not 0, absent when it is.
  const double standard_error =
      constant ? 0.0 : sample_stddev(deltas, c.mean_delta) / std::sqrt(static_cast<double>(c.n));
  if (standard_error == 0.0) {
    c.ci95 = 0.0;
    c.p_value = c.mean_delta == 0.0 ? 1.0 : 0.0;
    if (c.n >= kMinBootstrapSeeds) c.bootstrap_ci95 = std::make_pair(c.mean_delta, c.mean_delta);
  } else {
    c.ci95 = t_quantile_975(c.n - 1) * standard_error;
    c.p_value = two_sided_p(c.mean_delta / standard_error, c.n - 1);
    if (c.n >= kMinBootstrapSeeds) {
      c.bootstrap_ci95 = bootstrap_mean_ci95(deltas, bootstrap_seed, bootstrap_resamples);
    }
  }
  c.verdict = verdict_for(c.p_value, c.mean_delta, higher_is_better);
  return c;
}

bool higher_is_better(const std::string& metric_name) {
  std::string name = metric_name;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  for (const char* lower_is_better : {"loss", "perplexity", "error", "time"}) {
    if (name.find(lower_is_better) != std::string::npos) return false;
  }
  return true;
}

}  // namespace bertlab
