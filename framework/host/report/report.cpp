// comparison.md/.csv, plots/*.svg and report.html of an experiment's variants.

#include "report/report.h"

#include <bertlab/io/atomic_file.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "report/svg_plot.h"

namespace bertlab {

namespace fs = std::filesystem;

namespace {

/// A metrics.jsonl field plotted against step.
struct LinePlotSpec {
  const char* key;   ///< metrics.jsonl field
  const char* name;  ///< plots/NAME.svg
  const char* title;
  const char* y_label;
};

constexpr LinePlotSpec kLinePlots[] = {
    {"loss", "loss", "Training loss", "loss (mean over the logging window)"},
    {"learning_rate", "learning_rate", "Learning rate", "learning rate"},
    {"grad_norm", "grad_norm", "Gradient norm", "global norm before clipping"},
    {"examples_per_second", "throughput", "Throughput", "examples / s"},
};

std::vector<std::string> eval_metric_names(const std::vector<VariantOutputs>& outputs) {
  std::vector<std::string> names;
  for (const auto& o : outputs) {
    for (const auto& [name, value] : o.eval) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

double eval_value(const VariantOutputs& o, const std::string& name) {
  for (const auto& [n, v] : o.eval) {
    if (n == name) return v;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

const char* kStyle = R"(<style>
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1100px; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 4px 10px; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.meta { color: #555; } .plot { margin: 0.8em 0; } .swatch { display: inline-block; width: 0.9em;
  height: 0.9em; margin-right: 0.4em; vertical-align: middle; }
</style>
)";

bool looks_numeric(const std::string& s) {
  return !s.empty() &&
         (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s == "nan");
}

}  // namespace

std::string html_page_start(const std::string& title) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format("<title>{}</title>\n", xml_escape(title));
  out += kStyle;
  return out + "</head>\n<body>\n";
}

std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows) {
  std::string out = "<table>\n<tr>";
  for (const auto& h : header) out += "<th>" + xml_escape(h) + "</th>";
  out += "</tr>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (size_t i = 0; i < row.size(); ++i) {
      out += fmt::format("<td{}>{}</td>", i > 0 && looks_numeric(row[i]) ? " class=\"num\"" : "",
                         xml_escape(row[i]));
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

namespace {

/// The charts from `lines(key)` (a series per line for the metric `key`) and, when any run
/// evaluated, `bars(metrics)` (a series per bar group, values in `metrics` order); `note` follows
/// each chart's title (empty, or what the lines and bars summarize).
std::vector<ReportPlot> assemble_plots(
    const std::vector<VariantOutputs>& outputs,
    const std::function<std::vector<PlotSeries>(const std::string&)>& lines,
    const std::function<std::vector<PlotSeries>(const std::vector<std::string>&)>& bars,
    const std::string& line_note, const std::string& bar_note) {
  std::vector<ReportPlot> plots;
  for (const auto& spec : kLinePlots) {
    PlotOptions options;
    options.title = std::string(spec.title) + line_note;
    options.x_label = "step";
    options.y_label = spec.y_label;
    plots.push_back({fmt::format("plots/{}.svg", spec.name), options.title,
                     render_line_plot(options, lines(spec.key))});
  }
  const std::vector<std::string> metrics = eval_metric_names(outputs);
  if (!metrics.empty()) {
    PlotOptions options;
    options.title = "Eval metrics" + bar_note;
    options.y_label = "value";
    options.width = std::max(720, 200 + 110 * static_cast<int>(metrics.size()));
    plots.push_back(
        {"plots/eval.svg", options.title, render_bar_chart(options, metrics, bars(metrics))});
  }
  return plots;
}

}  // namespace

std::vector<ReportPlot> report_plots(const std::vector<std::string>& labels,
                                     const std::vector<VariantOutputs>& outputs) {
  auto lines = [&](const std::string& key) {
    std::vector<PlotSeries> series(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      series[i].name = labels[i];
      metric_series(outputs[i].metrics, key, &series[i].x, &series[i].y);
    }
    return series;
  };
  auto bars = [&](const std::vector<std::string>& metrics) {
    std::vector<PlotSeries> series(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      series[i].name = labels[i];
      for (const auto& m : metrics) series[i].y.push_back(eval_value(outputs[i], m));
    }
    return series;
  };
  return assemble_plots(outputs, lines, bars, "", "");
}

namespace {

/// mean, min and max of the finite values (NaN for all three when there is none).
void spread(const std::vector<double>& values, double* mean, double* lo, double* hi) {
  double sum = 0;
  int n = 0;
  *lo = std::numeric_limits<double>::infinity();
  *hi = -std::numeric_limits<double>::infinity();
  for (const double v : values) {
    if (!std::isfinite(v)) continue;
    sum += v;
    ++n;
    *lo = std::min(*lo, v);
    *hi = std::max(*hi, v);
  }
  if (n == 0) *mean = *lo = *hi = std::numeric_limits<double>::quiet_NaN();
  if (n > 0) *mean = sum / n;
}

/// One variant's runs (indices into the outputs), in the order they ran.
std::vector<std::pair<std::string, std::vector<size_t>>> runs_by_variant(
    const std::vector<VariantResult>& results) {
  std::vector<std::pair<std::string, std::vector<size_t>>> groups;
  for (size_t i = 0; i < results.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == results[i].name; });
    if (it == groups.end()) it = groups.insert(groups.end(), {results[i].name, {}});
    it->second.push_back(i);
  }
  return groups;
}

/// A variant's metric against step over its seeds: the mean at each step of its first run, the
/// band from the smallest to the largest value any seed logged at that step.
PlotSeries seed_series(const std::string& name, const std::vector<size_t>& runs,
                       const std::vector<VariantOutputs>& outputs, const std::string& key) {
  std::vector<std::map<double, double>> by_step(runs.size());
  std::vector<double> steps;
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<double> x, y;
    metric_series(outputs[runs[r]].metrics, key, &x, &y);
    if (r == 0) steps = x;
    for (size_t i = 0; i < x.size(); ++i) by_step[r][x[i]] = y[i];
  }
  PlotSeries s;
  s.name = name;
  for (const double step : steps) {
    std::vector<double> values;
    for (const auto& m : by_step) {
      auto it = m.find(step);
      if (it != m.end()) values.push_back(it->second);
    }
    double mean, lo, hi;
    spread(values, &mean, &lo, &hi);
    s.x.push_back(step);
    s.y.push_back(mean);
    s.lo.push_back(lo);
    s.hi.push_back(hi);
  }
  return s;
}

}  // namespace

std::vector<ReportPlot> seed_report_plots(const std::vector<VariantResult>& results,
                                          const std::vector<VariantOutputs>& outputs) {
  const auto groups = runs_by_variant(results);
  auto lines = [&](const std::string& key) {
    std::vector<PlotSeries> series;
    series.reserve(groups.size());
    for (const auto& [name, runs] : groups) series.push_back(seed_series(name, runs, outputs, key));
    return series;
  };
  auto bars = [&](const std::vector<std::string>& metrics) {
    std::vector<PlotSeries> series(groups.size());
    for (size_t g = 0; g < groups.size(); ++g) {
      series[g].name = groups[g].first;
      for (const auto& m : metrics) {
        std::vector<double> values;
        for (const size_t r : groups[g].second) values.push_back(eval_value(outputs[r], m));
        double mean, lo, hi;
        spread(values, &mean, &lo, &hi);
        series[g].y.push_back(mean);
        series[g].lo.push_back(lo);
        series[g].hi.push_back(hi);
      }
    }
    return series;
  };
  return assemble_plots(outputs, lines, bars, " (mean over seeds; band: min to max)",
                        " (mean over seeds; bars: min to max)");
}

std::string plots_markdown(const std::vector<ReportPlot>& plots) {
  std::string out = "\n## Plots\n\nEvery variant on the same axes; also in `report.html`.\n\n";
  for (const auto& p : plots) out += fmt::format("![{}]({})\n", p.title, p.file);
  return out;
}

std::string report_html(const ResolvedExperiment& experiment, const ComparisonTable& table,
                        const std::vector<std::string>& labels,
                        const std::vector<VariantOutputs>& outputs,
                        const std::vector<ReportPlot>& plots, const ComparisonTable* paired) {
  std::string out = html_page_start(experiment.name + ": bertlab report");
  out += fmt::format("<h1>{}: comparison</h1>\n", xml_escape(experiment.name));
  out += fmt::format(
      "<p class=\"meta\">Reference variant: <code>{}</code>. Experiment file: "
      "<code>{}</code>.</p>\n",
      xml_escape(experiment.reference), xml_escape(experiment.file.string()));
  out += "<h2>Variants</h2>\n" + html_table(table.header, table.rows);
  if (paired != nullptr) {
    out += fmt::format(
        "<h2>Against {}, paired by seed</h2>\n<p class=\"meta\">Mean difference (variant − "
        "reference) ± 95% CI; p: two-sided paired t-test; better or worse at p &lt; 0.05.</p>\n",
        xml_escape(experiment.reference));
    out += html_table(paired->header, paired->rows);
  }

  const std::vector<std::string> metrics = eval_metric_names(outputs);
  if (!metrics.empty()) {
    out += "<h2>Eval metrics</h2>\n";
    std::vector<std::string> header = {"metric"};
    header.insert(header.end(), labels.begin(), labels.end());
    std::vector<std::vector<std::string>> rows;
    for (const auto& m : metrics) {
      std::vector<std::string> row = {m};
      for (const auto& o : outputs) {
        const double v = eval_value(o, m);
        row.push_back(std::isnan(v) ? "" : fmt::format("{:.4f}", v));
      }
      rows.push_back(std::move(row));
    }
    out += html_table(header, rows);
  }

  out += "<h2>Plots</h2>\n<p>";
  // With several seeds a plot has a line per variant, not per run.
  std::vector<std::string> lines;
  for (const auto& l : labels) {
    const std::string variant = paired != nullptr ? l.substr(0, l.rfind(" seed ")) : l;
    if (std::find(lines.begin(), lines.end(), variant) == lines.end()) lines.push_back(variant);
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    out += fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>{}&nbsp;&nbsp; ",
                       series_colour(i), xml_escape(lines[i]));
  }
  out += "</p>\n";
  for (const auto& p : plots) {
    out += fmt::format("<div class=\"plot\" id=\"{}\">\n{}</div>\n",
                       xml_escape(fs::path(p.file).stem().string()), p.svg);
  }
  out += "<h2>Run folders</h2>\n<ul>\n";
  for (size_t i = 0; i < outputs.size(); ++i) {
    out += fmt::format("<li><code>{}</code>: {}</li>\n", xml_escape(labels[i]),
                       xml_escape(outputs[i].dir.string()));
  }
  out += "</ul>\n</body>\n</html>\n";
  return out;
}

std::string write_comparison(const fs::path& dir, const ResolvedExperiment& experiment,
                             const std::vector<VariantResult>& results,
                             const std::vector<VariantOutputs>& outputs) {
  std::vector<std::string> labels;
  labels.reserve(results.size());
  for (const auto& r : results) {
    labels.push_back(r.seed ? fmt::format("{} seed {}", r.name, *r.seed) : r.name);
  }
  const std::vector<ReportPlot> plots =
      has_seeds(results) ? seed_report_plots(results, outputs) : report_plots(labels, outputs);
  for (const auto& p : plots) write_file_atomic(dir / p.file, p.svg);
  std::string md = comparison_markdown(experiment, results) + plots_markdown(plots);
  write_file_atomic(dir / "comparison.md", md);
  write_file_atomic(dir / "comparison.csv", comparison_csv(experiment, results));
  const ComparisonTable table = comparison_table(experiment, results);
  std::optional<ComparisonTable> paired;
  if (has_seeds(results)) paired = seed_paired_table(experiment, results);
  write_file_atomic(dir / "report.html", report_html(experiment, table, labels, outputs, plots,
                                                     paired ? &*paired : nullptr));
  return md;
}

}  // namespace bertlab
