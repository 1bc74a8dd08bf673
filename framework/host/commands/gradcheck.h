#pragma once
// `bertlab gradcheck`: every variant runs K steps from the same weights and batches; its
// averaged gradients (per step, before clipping) and its parameters after K steps are compared
// with the reference variant's, against each variant's expectation (match or differ).

#include "config/experiment.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace bertlab {

struct GradcheckOptions {
  int64_t steps = 3;                                   ///< optimizer steps per variant
  std::optional<std::filesystem::path> save_baseline;  ///< write the run's numbers here
  std::optional<std::filesystem::path> baseline;       ///< compare the run's numbers with these
  /// Set: every nonzero initial weight one ulp up or down (directions from this seed), to show
  /// that a baseline holds where rounding differs (--perturb-ulp).
  std::optional<uint64_t> perturb_ulp_seed;
};

/// Runs the check, prints the table, writes gradcheck.md and gradcheck.json in the output
/// folder. Returns 0 when every variant meets its expectation (and the baseline, if any,
/// holds), 1 otherwise.
int run_gradcheck(const ResolvedExperiment& experiment, const GradcheckOptions& options);

}  // namespace bertlab
