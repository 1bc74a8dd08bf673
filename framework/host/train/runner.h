#pragma once
// Runs the variants of a resolved experiment and writes their outputs and the comparison.

#include "config/experiment.h"
#include "report/comparison.h"
#include "runtime/plugin_host.h"
#include "train/contract_probe.h"

#include <bertlab/optimizer.h>
#include <bertlab/task.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bertlab {

class GradientSet;

/// Observers of a run, for `bertlab gradcheck`.
struct RunHooks {
  /// > 0: stop after this many steps (the schedule still spans the configured run), skip
  /// evaluation and write no files.
  int64_t max_steps = 0;
  /// Rank 0, every step: the gradients averaged over the replicas, before clipping and update.
  std::function<void(int64_t step, const GradientSet& grads)> on_averaged;
  /// Rank 0, every step: the global batch's mean loss.
  std::function<void(int64_t step, double loss)> on_loss;
  /// Measure the strategy's contract on every rank (when its plugin declares one); rank 0
  /// receives each step's measures, the worst over the ranks.
  bool probe_contract = false;
  std::function<void(int64_t step, const ContractMeasures& measures)> on_contract;
  /// Rank 0, every step: the model's parameters right after the step's update (live tensors:
  /// copy what is kept).
  std::function<void(int64_t step, const std::vector<NamedTensor>& parameters)> on_parameters;
  /// Rank 0, once before the first step: the initial parameters (live tensors: copy them).
  std::function<void(const std::vector<NamedTensor>& parameters)> on_initial_parameters;
  /// Set: every nonzero initial weight moved one ulp (directions drawn from this seed), as
  /// another machine's rounding would (gradcheck --perturb-ulp; train/ulp_perturbation.h).
  std::optional<uint64_t> perturb_ulp_seed;
};

/// Trains and evaluates one variant; writes resolved.toml, metrics.jsonl, eval_results.json.
VariantResult run_variant(const ResolvedExperiment& experiment, const ResolvedVariant& variant,
                          const RunHooks& hooks = {});

/// The result of `variant` read from its folder when a run of the same configuration
/// (run_summary.json's config_hash) finished there; nullopt when it must run. The caller decides
/// whether a skip is safe (not in a launched rank, whose peers may not see this folder).
std::optional<VariantResult> finished_run(const ResolvedExperiment& experiment,
                                          const ResolvedVariant& variant);

struct RunExperimentOptions {
  bool rerun = false;      ///< also run variants finished_run() finds
  bool comparison = true;  ///< write the comparison files after the runs
};

/// Runs every selected variant in order (each finished_run() skipped unless options.rerun), then
/// writes comparison.md and comparison.csv. Returns the comparison table (Markdown), or "" when
/// options.comparison is false or this is not the process that writes files.
std::string run_experiment(const ResolvedExperiment& experiment, const PluginHost& host,
                           const RunExperimentOptions& options = {});

}  // namespace bertlab
