// gradcheck's regression baselines (`--save-baseline`, `--baseline`): per variant the numbers a
// run gives and, per field, the tolerance that follows from what the variant promises, so a
// baseline written on one machine holds on another with correct code and fails on a regression.
// docs/strategy-contracts.md ("Regression baselines") derives the rule; the file's format is
// there too.

#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace bertlab {

/// What the variant's strategy promises, as the tolerance rule needs it (StrategyContract
/// without its tensors; kind "exact" when the strategy declares none).
struct BaselineContract {
  std::string kind = "exact";  ///< exact | bounded | exact_until
  double rtol = 0.0;           ///< bounded: the element-wise bound's relative part
  double atol = 0.0;           ///< bounded: its absolute part
  int64_t until_step = 0;      ///< exact_until: steps 0 .. until_step−1 are exact
  std::string summary = "exact";
};

/// How a variant ended against its expectation: a `differ` row is kept by this, not by digits.
struct BaselineVerdict {
  std::string result;  ///< PASS | FAIL (the gradcheck row's)
  /// The parts of the contract it broke (bound, until, error_feedback, sync, state, stopped,
  /// reference), in the check's order.
  std::vector<std::string> broken;
  /// Where it first leaves the reference: "step S: dense gradient, sparse gradient", "step S:
  /// parameters", "step S: training stopped"; "" when it never does.
  std::string first_difference;
};

/// One variant's gradcheck, as a baseline keeps and compares it.
struct BaselineRun {
  std::string expect;         ///< contract | match | differ
  BaselineContract contract;  ///< kind "exact" for an `expect = "match"` row
  double rtol = 1e-5;         ///< the variant's gradcheck tolerance: float32 summation order
  double atol = 1e-6;
  std::vector<double> grad_norms;      ///< [step] ‖averaged gradient‖₂, before clipping
  std::vector<double> losses;          ///< [step] the global batch's mean loss
  std::vector<double> abs_mean_norms;  ///< [step] bounded: ‖(1/N)Σ_i |g_i|‖₂
  std::vector<int64_t> elements;       ///< [step] bounded: elements of the gradient
  double update_norm = 0.0;            ///< ‖θ_K − θ_0‖₂, the parameters' whole move
  double param_sum = 0.0;              ///< Σθ_K
  double param_sum_squares = 0.0;      ///< Σθ_K²
  BaselineVerdict verdict;
};

/// The baseline file of `runs` (in `order`): format 2, with this machine's record.
nlohmann::ordered_json baseline_file(const std::string& experiment, int64_t steps,
                                     const std::vector<std::string>& order,
                                     const std::map<std::string, BaselineRun>& runs);

/// A comparison with a baseline file.
struct BaselineCheck {
  std::vector<std::string> problems;  ///< one line each; empty: every variant unchanged
  double largest_use = 0.0;           ///< max |now − baseline| / tolerance over compared fields
  std::string largest_at;             ///< "variant 'x', grad_norms[step 3] (bounded)"
  /// Per rule (exact, bounded, unbounded): its largest use and where.
  std::map<std::string, std::pair<double, std::string>> largest_by_rule;
  std::vector<std::string> machine;         ///< how this machine differs from the baseline's
  std::string machine_here, machine_there;  ///< each machine in one line
};

/// Compares `runs` (in `order`) with `baseline`, read from `file` (named in the problems).
BaselineCheck check_baseline_file(const nlohmann::json& baseline,
                                  const std::vector<std::string>& order,
                                  const std::map<std::string, BaselineRun>& runs,
                                  const std::string& file);

}  // namespace bertlab
