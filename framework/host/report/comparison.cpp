// comparison.md and comparison.csv: one row per variant.

#include "report/comparison.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

}  // namespace

ComparisonTable comparison_table(const ResolvedExperiment& experiment,
                                 const std::vector<VariantResult>& results) {
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

std::string comparison_markdown(const ResolvedExperiment& experiment,
                                const std::vector<VariantResult>& results) {
  ComparisonTable t = comparison_table(experiment, results);
  std::string out =
      fmt::format("# {}: comparison\n\nReference variant: `{}`. Experiment file: `{}`.\n\n",
                  experiment.name, experiment.reference, experiment.file.string());
  out += "| " + fmt::format("{}", fmt::join(t.header, " | ")) + " |\n";
  out += "|";
  for (size_t i = 0; i < t.header.size(); ++i) out += i == 0 ? "---|" : "---:|";
  out += "\n";
  for (const auto& row : t.rows) out += "| " + fmt::format("{}", fmt::join(row, " | ")) + " |\n";
  return out;
}

std::string comparison_csv(const ResolvedExperiment& experiment,
                           const std::vector<VariantResult>& results) {
  ComparisonTable t = comparison_table(experiment, results);
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
