#pragma once
// The comparison of an experiment's variants: what each produced (VariantResult) and the table
// of comparison.md and comparison.csv.

#include <ATen/core/Tensor.h>
#include <bertlab/task.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/experiment.h"

namespace bertlab {

/// What one variant produced, for the comparison table.
struct VariantResult {
  std::string name;
  std::optional<int64_t> seed;       ///< this run's seed when the variant ran with several
  std::filesystem::path dir;         ///< runs/<experiment>/<variant>/[seed-<seed>/]
  int64_t steps = 0;                 ///< optimizer steps taken
  double final_loss = 0.0;           ///< mean training loss over the last logging window
  Metrics eval_metrics;              ///< empty when do_eval is false
  FloorMetrics floor;                ///< the task's floor (Task::floor_metrics), if any
  double examples_per_second = 0.0;  ///< training throughput over the whole run
  double wall_time_s = 0.0;          ///< data preparation, training and evaluation
  std::map<std::string, at::Tensor> final_parameters;  ///< CPU copies, for the comparison
};

/// The comparison: one row per variant (name, steps, final loss, eval metrics, throughput,
/// wall time, largest parameter difference from the reference), then a row per task floor
/// ("floor: majority class (DESC)", its eval metrics only).
struct ComparisonTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};
ComparisonTable comparison_table(const ResolvedExperiment& experiment,
                                 const std::vector<VariantResult>& results);

/// True when the variants ran with several seeds (VariantResult::seed set): the comparison then
/// aggregates each variant's runs.
bool has_seeds(const std::vector<VariantResult>& results);

/// With several seeds: per variant the number of seeds and, per metric (final_loss, the eval
/// metrics, examples_per_second), mean ± 95% CI half-width (Student's t); then the floor rows.
ComparisonTable seed_summary_table(const ResolvedExperiment& experiment,
                                   const std::vector<VariantResult>& results);
/// With several seeds: every variant but the reference against it, paired by seed, a row per
/// metric: pairs, mean difference ± 95% CI, the bootstrap interval (from 5 seeds), paired t-test
/// p, verdict.
ComparisonTable seed_paired_table(const ResolvedExperiment& experiment,
                                  const std::vector<VariantResult>& results);
/// With several seeds: comparison.csv's columns, per metric M: M_mean, M_std, M_ci95, M_min,
/// M_max, M_delta_vs_ref, M_delta_ci95_vs_ref, M_delta_boot_lo_vs_ref, M_delta_boot_hi_vs_ref,
/// M_p_vs_ref, M_verdict_vs_ref; and seeds.
ComparisonTable seed_csv_table(const ResolvedExperiment& experiment,
                               const std::vector<VariantResult>& results);

/// A Markdown table (first column left-aligned, the others right).
std::string markdown_table(const ComparisonTable& table);

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
