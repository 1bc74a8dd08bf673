#pragma once
// Small self-contained SVG charts for run reports: line plots of metrics against step (one
// colour per variant, shared axes) and grouped bar charts. No external fonts or scripts.

#include <string>
#include <string_view>
#include <vector>

namespace bertlab {

/// One line of a line plot: points (x[i], y[i]); a non-finite y breaks the line there.
struct PlotSeries {
  std::string name;       ///< legend entry
  std::vector<double> x;  ///< e.g. steps
  std::vector<double> y;  ///< same length as x
  /// Optional spread around y (e.g. the min and max over seeds), same length as x when set:
  /// a shaded band in line plots, an error bar in bar charts. A non-finite bound is not drawn.
  std::vector<double> lo = {};
  std::vector<double> hi = {};
};

/// What a chart shows around its data.
struct PlotOptions {
  std::string title;    ///< above the plot area
  std::string x_label;  ///< below the x axis
  std::string y_label;  ///< beside the y axis
  int width = 720;      ///< pixels
  int height = 360;     ///< pixels
  /// Line plots: a base-10 logarithmic y axis, a tick at each power of ten. A value below
  /// `y_floor` (zero among them) is drawn at y_floor; an infinite or NaN value as a marker on
  /// the top edge labelled "inf" or "nan".
  bool log_y = false;
  double y_floor = 1e-12;  ///< with log_y: the smallest value drawn
};

/// The SVG document of a line plot of every series on the same axes, with ticks and a legend
/// (linear axes, or a logarithmic y axis with `options.log_y`).
std::string render_line_plot(const PlotOptions& options, const std::vector<PlotSeries>& series);

/// One group per category, one bar per series in it (series[i].y[c] is series i's value in
/// category c; x is unused). For eval metrics side by side.
std::string render_bar_chart(const PlotOptions& options, const std::vector<std::string>& categories,
                             const std::vector<PlotSeries>& series);

/// Round tick positions covering [lo, hi]: multiples of 1, 2 or 5 times a power of ten, about
/// `target` of them. lo == hi gives ticks around the value.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

/// A tick label for `v` on an axis whose ticks are `spacing` apart.
std::string format_tick(double v, double spacing);

/// `text` with &, <, >, " and ' replaced by entities, for SVG and HTML text and attributes.
std::string xml_escape(std::string_view text);

/// The colour of series i (#rrggbb), cycling through ten distinguishable colours.
const char* series_colour(size_t i);

}  // namespace bertlab
