#pragma once
// Classification metrics over predicted and true label ids.

#include <cstdint>
#include <vector>

namespace bertlab::classifier {

/// Counts of a binary confusion matrix for one positive class.
struct BinaryCounts {
  int64_t true_positive = 0;
  int64_t false_positive = 0;
  int64_t true_negative = 0;
  int64_t false_negative = 0;
};

/// Tallies `predictions` against `labels` (same length) with `positive` as the positive class.
BinaryCounts count_binary(const std::vector<int64_t>& predictions,
                          const std::vector<int64_t>& labels, int64_t positive);

/// Fraction of predictions equal to their label; 0 for no examples.
double accuracy(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels);

/// F1 of class `positive` (MRPC's reported F1 uses label "1"): 2TP / (2TP + FP + FN), 0 when
/// there is neither a predicted nor a true positive.
double f1_score(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels,
                int64_t positive = 1);

/// Matthews correlation (CoLA's metric) with `positive` as the positive class:
/// (TP·TN − FP·FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)), 0 when a factor is 0 (as
/// scikit-learn's matthews_corrcoef).
double matthews_corrcoef(const std::vector<int64_t>& predictions,
                         const std::vector<int64_t>& labels, int64_t positive = 1);

/// Arithmetic mean; 0 for no values.
double mean(const std::vector<double>& values);

/// Pearson correlation of `x` and `y` (same length, at least 2): cov(x, y) / (σx σy), as
/// scipy.stats.pearsonr. 0 when either side is constant (scipy gives nan, which JSON cannot hold).
double pearson(const std::vector<double>& x, const std::vector<double>& y);

/// 1-based ranks of `values`, tied values sharing the mean of their ranks (scipy's rankdata
/// "average"): {10, 20, 20, 5} → {2, 3.5, 3.5, 1}.
std::vector<double> average_ranks(const std::vector<double>& values);

/// Spearman rank correlation, as scipy.stats.spearmanr: the Pearson correlation of the average
/// ranks (so ties are handled as scipy does).
double spearman(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace bertlab::classifier
