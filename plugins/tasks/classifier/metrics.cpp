#include "metrics.h"

#include <bertlab/error.h>

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

}  // namespace bertlab::classifier
