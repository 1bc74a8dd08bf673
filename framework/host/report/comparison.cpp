// comparison.md and comparison.csv: one row per variant.

#include "report/comparison.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "report/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace bertlab {

std::optional<double> max_parameter_difference(const std::map<std::string, at::Tensor>& a,
                                               const std::map<std::string, at::Tensor>& b) {
  if (a.size() != b.size()) return std::nullopt;
  double worst = 0.0;
  for (const auto& [name, ta] : a) {
    auto it = b.find(name);
    if (it == b.end() || !ta.sizes().equals(it->second.sizes())) return std::nullopt;
    worst = std::max(worst,
                     (ta.to(at::kDouble) - it->second.to(at::kDouble)).abs().max().item<double>());
  }
  return worst;
}

namespace {

std::string format_number(double v) {
  if (!std::isfinite(v)) return "nan";
  return fmt::format("{:.4f}", v);
}

/// The tasks' floors among the results, each once, in first-seen order (one for a study whose
/// variants share their evaluation set).
std::vector<const FloorMetrics*> distinct_floors(const std::vector<VariantResult>& results) {
  std::vector<const FloorMetrics*> floors;
  for (const auto& r : results) {
    if (r.floor.name.empty()) continue;
    const bool seen = std::any_of(floors.begin(), floors.end(), [&](const FloorMetrics* f) {
      return f->name == r.floor.name && f->metrics == r.floor.metrics;
    });
    if (!seen) floors.push_back(&r.floor);
  }
  return floors;
}

/// A floor's row label: "floor: majority class (DESC)".
std::string floor_label(const FloorMetrics& floor) { return "floor: " + floor.name; }

std::optional<double> floor_value(const FloorMetrics& floor, const std::string& metric) {
  for (const auto& [name, value] : floor.metrics) {
    if (name == metric) return value;
  }
  return std::nullopt;
}

}  // namespace

bool has_seeds(const std::vector<VariantResult>& results) {
  return std::any_of(results.begin(), results.end(), [](const auto& r) { return r.seed; });
}

namespace {

/// One variant's runs, in the order they ran.
struct SeedRuns {
  std::string name;
  std::vector<const VariantResult*> runs;
};

std::vector<SeedRuns> group_by_variant(const std::vector<VariantResult>& results) {
  std::vector<SeedRuns> groups;
  for (const auto& r : results) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const SeedRuns& g) { return g.name == r.name; });
    if (it == groups.end()) {
      groups.push_back({r.name, {}});
      it = groups.end() - 1;
    }
    it->runs.push_back(&r);
  }
  return groups;
}

/// The compared metrics: final_loss, every eval metric (first-seen order), examples_per_second.
std::vector<std::string> seed_metric_names(const std::vector<VariantResult>& results) {
  std::vector<std::string> names = {"final_loss"};
  for (const auto& r : results) {
    for (const auto& [name, value] : r.eval_metrics) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  names.push_back("examples_per_second");
  return names;
}

double metric_value(const VariantResult& r, const std::string& metric) {
  if (metric == "final_loss") return r.final_loss;
  if (metric == "examples_per_second") return r.examples_per_second;
  for (const auto& [name, value] : r.eval_metrics) {
    if (name == metric) return value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> metric_values(const SeedRuns& group, const std::string& metric) {
  std::vector<double> values;
  for (const auto* r : group.runs) values.push_back(metric_value(*r, metric));
  return values;
}

/// `group` against `reference` on `metric`, paired by seed (seeds only one of them ran are left
/// out). Bootstrap resamples are drawn from a fixed seed: the table is the same on every rerun.
PairedComparison paired_by_seed(const SeedRuns& group, const SeedRuns& reference,
                                const std::string& metric) {
  std::vector<double> mine, theirs;
  for (const auto* r : group.runs) {
    for (const auto* ref : reference.runs) {
      if (r->seed == ref->seed) {
        mine.push_back(metric_value(*r, metric));
        theirs.push_back(metric_value(*ref, metric));
      }
    }
  }
  return compare_paired(mine, theirs, higher_is_better(metric));
}

/// Whether `group` reports one of the evaluation metrics `reference` does (none: another task,
/// e.g. the pretraining stage a fine-tuning starts from, whose loss is another objective).
bool shares_eval_metrics(const SeedRuns& group, const SeedRuns& reference) {
  std::set<std::string> names;
  for (const auto* r : reference.runs) {
    for (const auto& [name, value] : r->eval_metrics) names.insert(name);
  }
  if (names.empty()) return true;
  for (const auto* r : group.runs) {
    for (const auto& [name, value] : r->eval_metrics) {
      if (names.count(name) != 0) return true;
    }
  }
  return false;
}

std::string format_stat(double v, const char* spec = "{:.4f}") {
  if (!std::isfinite(v)) return "";
  return fmt::format(fmt::runtime(spec), v);
}

const SeedRuns* find_group(const std::vector<SeedRuns>& groups, const std::string& name) {
  for (const auto& g : groups) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

/// "mean ± ci95" (the interval omitted with one seed).
std::string mean_cell(const SampleSummary& s) {
  if (s.n == 0) return "";
  if (!std::isfinite(s.ci95)) return format_stat(s.mean);
  return format_stat(s.mean) + " ± " + format_stat(s.ci95);
}

/// "+0.0123 ± 0.0100" (the interval omitted with one pair).
std::string delta_cell(const PairedComparison& c) {
  if (c.n == 0) return "";
  std::string cell = format_stat(c.mean_delta, "{:+.4f}");
  if (std::isfinite(c.ci95)) cell += " ± " + format_stat(c.ci95);
  return cell;
}

}  // namespace

ComparisonTable seed_summary_table(const ResolvedExperiment& experiment,
                                   const std::vector<VariantResult>& results) {
  (void)experiment;
  const std::vector<std::string> metrics = seed_metric_names(results);
  ComparisonTable t;
  t.header = {"variant", "seeds"};
  for (const auto& m : metrics) t.header.push_back(m + " (mean ± 95% CI)");
  for (const auto& group : group_by_variant(results)) {
    std::vector<std::string> row = {group.name, std::to_string(group.runs.size())};
    for (const auto& m : metrics) row.push_back(mean_cell(summarize(metric_values(group, m))));
    t.rows.push_back(std::move(row));
  }
  for (const FloorMetrics* floor : distinct_floors(results)) {
    std::vector<std::string> row = {floor_label(*floor), ""};
    for (const auto& m : metrics) {
      const std::optional<double> v = floor_value(*floor, m);
      row.push_back(v ? format_stat(*v) : "");
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

ComparisonTable seed_paired_table(const ResolvedExperiment& experiment,
                                  const std::vector<VariantResult>& results) {
  std::vector<std::string> metrics = seed_metric_names(results);
  metrics.pop_back();  // throughput: a property of the machine's load, not of the variant
  const std::vector<SeedRuns> groups = group_by_variant(results);
  const SeedRuns* reference = find_group(groups, experiment.reference);
  ComparisonTable t;
  t.header = {"variant",          "metric", "seeds",  "Δ vs reference (95% CI)",
              "bootstrap 95% CI", "p",      "verdict"};
  if (reference == nullptr) return t;
  for (const auto& group : groups) {
    if (&group == reference || !shares_eval_metrics(group, *reference)) continue;
    for (const auto& m : metrics) {
      const PairedComparison c = paired_by_seed(group, *reference, m);
      if (c.n == 0) continue;  // a metric only one of the two reports
      t.rows.push_back({group.name, m, std::to_string(c.n), delta_cell(c),
                        c.bootstrap_ci95
                            ? fmt::format("{:+.4f} to {:+.4f}", c.bootstrap_ci95->first,
                                          c.bootstrap_ci95->second)
                            : "",
                        format_stat(c.p_value, "{:.3g}"), to_string(c.verdict)});
    }
  }
  return t;
}

ComparisonTable seed_csv_table(const ResolvedExperiment& experiment,
                               const std::vector<VariantResult>& results) {
  const std::vector<std::string> metrics = seed_metric_names(results);
  const std::vector<SeedRuns> groups = group_by_variant(results);
  const SeedRuns* reference = find_group(groups, experiment.reference);
  ComparisonTable t;
  t.header = {"variant", "seeds"};
  for (const auto& m : metrics) {
    for (const char* suffix :
         {"_mean", "_std", "_ci95", "_min", "_max", "_delta_vs_ref", "_delta_ci95_vs_ref",
          "_delta_boot_lo_vs_ref", "_delta_boot_hi_vs_ref", "_p_vs_ref", "_verdict_vs_ref"}) {
      t.header.push_back(m + suffix);
    }
  }
  for (const auto& group : groups) {
    std::vector<std::string> row = {group.name, std::to_string(group.runs.size())};
    for (const auto& m : metrics) {
      const SampleSummary s = summarize(metric_values(group, m));
      for (const double v : {s.mean, s.stddev, s.ci95, s.min, s.max}) {
        row.push_back(format_stat(v, "{:.6g}"));
      }
      if (reference == nullptr) {
        row.insert(row.end(), 6, "");
        continue;
      }
      const PairedComparison c = paired_by_seed(group, *reference, m);
      row.push_back(format_stat(c.mean_delta, "{:.6g}"));
      row.push_back(format_stat(c.ci95, "{:.6g}"));
      row.push_back(c.bootstrap_ci95 ? format_stat(c.bootstrap_ci95->first, "{:.6g}") : "");
      row.push_back(c.bootstrap_ci95 ? format_stat(c.bootstrap_ci95->second, "{:.6g}") : "");
      row.push_back(format_stat(c.p_value, "{:.6g}"));
      row.push_back(&group == reference ? "reference" : to_string(c.verdict));
    }
    t.rows.push_back(std::move(row));
  }
  for (const FloorMetrics* floor : distinct_floors(results)) {
    std::vector<std::string> row = {floor_label(*floor), ""};
    for (const auto& m : metrics) {
      const std::optional<double> v = floor_value(*floor, m);
      row.push_back(v ? format_stat(*v, "{:.6g}") : "");  // as the mean; no spread
      row.insert(row.end(), 10, "");
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

ComparisonTable comparison_table(const ResolvedExperiment& experiment,
                                 const std::vector<VariantResult>& results) {
  if (has_seeds(results)) return seed_summary_table(experiment, results);
  // Metric columns: every metric any variant reported, in first-seen order.
  std::vector<std::string> metric_names;
  for (const auto& r : results) {
    for (const auto& [name, value] : r.eval_metrics) {
      if (std::find(metric_names.begin(), metric_names.end(), name) == metric_names.end()) {
        metric_names.push_back(name);
      }
    }
  }
  const VariantResult* reference = nullptr;
  for (const auto& r : results) {
    if (r.name == experiment.reference) reference = &r;
  }
  ComparisonTable t;
  t.header = {"variant", "steps", "final_loss"};
  t.header.insert(t.header.end(), metric_names.begin(), metric_names.end());
  t.header.insert(t.header.end(), {"examples_per_second", "wall_time_s",
                                   "max_param_diff_vs_" + experiment.reference});
  for (const auto& r : results) {
    std::vector<std::string> row = {r.name, std::to_string(r.steps), format_number(r.final_loss)};
    for (const auto& m : metric_names) {
      auto it = std::find_if(r.eval_metrics.begin(), r.eval_metrics.end(),
                             [&](const auto& p) { return p.first == m; });
      row.push_back(it == r.eval_metrics.end() ? "" : format_number(it->second));
    }
    row.push_back(fmt::format("{:.1f}", r.examples_per_second));
    row.push_back(fmt::format("{:.1f}", r.wall_time_s));
    if (reference == nullptr) {
      row.push_back("n/a (reference not run)");
    } else if (r.final_parameters.empty() || reference->final_parameters.empty()) {
      row.push_back("n/a (no final weights)");
    } else if (auto diff =
                   max_parameter_difference(r.final_parameters, reference->final_parameters)) {
      row.push_back(fmt::format("{:.3g}", *diff));
    } else {
      row.push_back("n/a (different parameters)");
    }
    t.rows.push_back(std::move(row));
  }
  for (const FloorMetrics* floor : distinct_floors(results)) {
    std::vector<std::string> row = {floor_label(*floor), "", ""};
    for (const auto& m : metric_names) {
      const std::optional<double> v = floor_value(*floor, m);
      row.push_back(v ? format_number(*v) : "");
    }
    row.insert(row.end(), 3, "");
    t.rows.push_back(std::move(row));
  }
  return t;
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string markdown_table(const ComparisonTable& t) {
  std::string out = "| " + fmt::format("{}", fmt::join(t.header, " | ")) + " |\n";
  out += "|";
  for (size_t i = 0; i < t.header.size(); ++i) out += i == 0 ? "---|" : "---:|";
  out += "\n";
  for (const auto& row : t.rows) out += "| " + fmt::format("{}", fmt::join(row, " | ")) + " |\n";
  return out;
}

std::string comparison_markdown(const ResolvedExperiment& experiment,
                                const std::vector<VariantResult>& results) {
  std::string out =
      fmt::format("# {}: comparison\n\nReference variant: `{}`. Experiment file: `{}`.\n\n",
                  experiment.name, experiment.reference, experiment.file.string());
  if (!distinct_floors(results).empty()) {
    out +=
        "A `floor:` row is what a model that learned nothing scores on the same evaluation set "
        "(a majority class: the most frequent training label answered for every example).\n\n";
  }
  if (!has_seeds(results)) return out + markdown_table(comparison_table(experiment, results));
  out += fmt::format(
      "Every variant ran once per seed ({}). Mean over the seeds ± the half-width of its 95% "
      "confidence interval (Student's t, n − 1 degrees of freedom).\n\n",
      fmt::join(experiment.seeds, ", "));
  out += markdown_table(seed_summary_table(experiment, results));
  out += fmt::format(
      "\nAgainst `{}`, paired by seed: the mean difference (variant − reference) ± its 95% CI "
      "(Student's t), the percentile bootstrap interval (from 5 seeds), p of a two-sided paired "
      "t-test, and `better` or `worse` when p < 0.05 (lower is better for losses), else no "
      "significant difference. comparison.csv has every statistic per metric. A variant that "
      "reports none of the reference's evaluation metrics (another task: a pretraining stage) "
      "is not paired.\n\n",
      experiment.reference);
  return out + markdown_table(seed_paired_table(experiment, results));
}

std::string comparison_csv(const ResolvedExperiment& experiment,
                           const std::vector<VariantResult>& results) {
  const ComparisonTable t = has_seeds(results) ? seed_csv_table(experiment, results)
                                               : comparison_table(experiment, results);
  auto line = [](const std::vector<std::string>& fields) {
    std::string out;
    for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
    return out + "\n";
  };
  std::string out = line(t.header);
  for (const auto& row : t.rows) out += line(row);
  return out;
}

}  // namespace bertlab
