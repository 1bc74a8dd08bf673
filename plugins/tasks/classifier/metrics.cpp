#include "metrics.h"

#include <bertlab/error.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace bertlab::classifier {

namespace {

void require_same_length(const std::vector<int64_t>& predictions,
                         const std::vector<int64_t>& labels) {
  BERTLAB_CHECK(predictions.size() == labels.size(),
                "{} predictions for {} labels: a metric needs one prediction per label",
                predictions.size(), labels.size());
}

}  // namespace

BinaryCounts count_binary(const std::vector<int64_t>& predictions,
                          const std::vector<int64_t>& labels, int64_t positive) {
  require_same_length(predictions, labels);
  BinaryCounts counts;
  for (size_t i = 0; i < labels.size(); ++i) {
    const bool predicted = predictions[i] == positive;
    const bool actual = labels[i] == positive;
    if (predicted && actual) ++counts.true_positive;
    if (predicted && !actual) ++counts.false_positive;
    if (!predicted && actual) ++counts.false_negative;
    if (!predicted && !actual) ++counts.true_negative;
  }
  return counts;
}

double accuracy(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels) {
  require_same_length(predictions, labels);
  if (labels.empty()) return 0.0;
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) correct += predictions[i] == labels[i] ? 1 : 0;
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

double f1_score(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels,
                int64_t positive) {
  const BinaryCounts c = count_binary(predictions, labels, positive);
  const auto denominator =
      static_cast<double>(2 * c.true_positive + c.false_positive + c.false_negative);
  return denominator == 0.0 ? 0.0 : 2.0 * static_cast<double>(c.true_positive) / denominator;
}

double matthews_corrcoef(const std::vector<int64_t>& predictions,
                         const std::vector<int64_t>& labels, int64_t positive) {
  const BinaryCounts c = count_binary(predictions, labels, positive);
  const auto tp = static_cast<double>(c.true_positive);
  const auto fp = static_cast<double>(c.false_positive);
  const auto tn = static_cast<double>(c.true_negative);
  const auto fn = static_cast<double>(c.false_negative);
  const double denominator = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn);
  if (denominator == 0.0) return 0.0;
  return (tp * tn - fp * fn) / std::sqrt(denominator);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  BERTLAB_CHECK(x.size() == y.size() && x.size() >= 2,
                "a correlation needs two series of the same length, at least 2; got {} and {}",
                x.size(), y.size());
  const double mean_x = mean(x);
  const double mean_y = mean(y);
  double xy = 0.0;
  double xx = 0.0;
  double yy = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += (x[i] - mean_x) * (y[i] - mean_y);
    xx += (x[i] - mean_x) * (x[i] - mean_x);
    yy += (y[i] - mean_y) * (y[i] - mean_y);
  }
  if (xx == 0.0 || yy == 0.0) return 0.0;
  return xy / std::sqrt(xx * yy);
}

std::vector<double> average_ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());  // [rank - 1] → index into values
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t start = 0; start < order.size();) {
    size_t end = start + 1;  // [start, end): one run of equal values
    while (end < order.size() && values[order[end]] == values[order[start]]) ++end;
    // Ranks start + 1 ... end share their mean.
    const double rank = (static_cast<double>(start + 1) + static_cast<double>(end)) / 2.0;
    for (size_t k = start; k < end; ++k) ranks[order[k]] = rank;
    start = end;
  }
  return ranks;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  return pearson(average_ranks(x), average_ranks(y));
}

}  // namespace bertlab::classifier
