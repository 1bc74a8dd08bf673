#pragma once
// Runs the variants of a resolved experiment and writes their outputs and the comparison.

#include "config/experiment.h"
#include "runtime/plugin_host.h"

#include <bertlab/task.h>

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bertlab {

class GradientSet;

/// What one variant produced, for the comparison table.
struct VariantResult {
  std::string name;
  std::filesystem::path dir;         ///< runs/<experiment>/<variant>/
  int64_t steps = 0;                 ///< optimizer steps taken
  double final_loss = 0.0;           ///< mean training loss over the last logging window
  Metrics eval_metrics;              ///< empty when do_eval is false
  double examples_per_second = 0.0;  ///< training throughput over the whole run
  double wall_time_s = 0.0;          ///< data preparation, training and evaluation
  std::map<std::string, at::Tensor> final_parameters;  ///< CPU copies, for the comparison
};

/// Observers of a run, for `bertlab gradcheck`.
struct RunHooks {
  /// > 0: stop after this many steps (the schedule still spans the configured run), skip
  /// evaluation and write no files.
  int64_t max_steps = 0;
  /// Rank 0, every step: the gradients averaged over the replicas, before clipping and update.
  std::function<void(int64_t step, const GradientSet& grads)> on_averaged;
  /// Rank 0, every step: the global batch's mean loss.
  std::function<void(int64_t step, double loss)> on_loss;
};

/// Trains and evaluates one variant; writes resolved.toml, metrics.jsonl, eval_results.json.
VariantResult run_variant(const ResolvedExperiment& experiment, const ResolvedVariant& variant,
                          const RunHooks& hooks = {});

/// Runs every selected variant in order, then writes comparison.md and comparison.csv.
/// Returns the comparison table (Markdown).
std::string run_experiment(const ResolvedExperiment& experiment, const PluginHost& host);

/// The comparison: one row per variant (name, steps, final loss, eval metrics, throughput,
/// wall time, largest parameter difference from the reference).
struct ComparisonTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
ComparisonTable comparison_table(const ResolvedExperiment& experiment,
                                 const std::vector<VariantResult>& results);

/// comparison.md / comparison.csv contents from the results (the reference may be absent).
std::string comparison_markdown(const ResolvedExperiment& experiment,
                                const std::vector<VariantResult>& results);
std::string comparison_csv(const ResolvedExperiment& experiment,
                           const std::vector<VariantResult>& results);

/// Largest absolute element difference between two parameter sets, or nullopt when their
/// names or shapes differ.
std::optional<double> max_parameter_difference(const std::map<std::string, at::Tensor>& a,
                                               const std::map<std::string, at::Tensor>& b);

}  // namespace bertlab
