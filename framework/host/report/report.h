#pragma once
// The comparison of an experiment's variants as files: comparison.md and comparison.csv (the
// table), plots/*.svg (metrics against step, eval metrics side by side) and report.html (all
// of it in one self-contained page: inline CSS and SVG, no scripts, fonts or network).

#include <filesystem>
#include <string>
#include <vector>

#include "report/comparison.h"
#include "report/run_outputs.h"

namespace bertlab {

/// The start of a report page, up to and including <body>: `title` and the shared CSS (inline).
std::string html_page_start(const std::string& title);

/// An HTML table in the report style; a cell after the first that looks like a number is
/// right-aligned. Every text is escaped.
std::string html_table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows);

/// One chart of the report.
struct ReportPlot {
  std::string file;   ///< relative to the experiment folder: plots/NAME.svg
  std::string title;  ///< also the alt text
  std::string svg;    ///< the document
};

/// The report's charts: loss, learning rate, gradient norm and throughput against step (every
/// variant on the same axes) and, when any variant evaluated, its eval metrics side by side.
/// `labels[i]` names `outputs[i]`.
std::vector<ReportPlot> report_plots(const std::vector<std::string>& labels,
                                     const std::vector<VariantOutputs>& outputs);

/// The same charts for runs of several seeds (results[i] and outputs[i] one run): a line per
/// variant, the mean over its seeds at each step with a band from the smallest to the largest
/// value; eval metrics as the mean with a min-to-max error bar.
std::vector<ReportPlot> seed_report_plots(const std::vector<VariantResult>& results,
                                          const std::vector<VariantOutputs>& outputs);

/// The Markdown section linking the plots (relative paths), appended to comparison.md.
std::string plots_markdown(const std::vector<ReportPlot>& plots);

/// report.html: the comparison table, the plots inline, eval metrics side by side; with several
/// seeds also `paired`, the variants against the reference (seed_paired_table).
std::string report_html(const ResolvedExperiment& experiment, const ComparisonTable& table,
                        const std::vector<std::string>& labels,
                        const std::vector<VariantOutputs>& outputs,
                        const std::vector<ReportPlot>& plots,
                        const ComparisonTable* paired = nullptr);

/// Writes comparison.md, comparison.csv, plots/*.svg and report.html into `dir` (each
/// atomically); results[i] and outputs[i] are the same variant, named results[i].name.
/// Returns the comparison Markdown.
std::string write_comparison(const std::filesystem::path& dir, const ResolvedExperiment& experiment,
                             const std::vector<VariantResult>& results,
                             const std::vector<VariantOutputs>& outputs);

}  // namespace bertlab
