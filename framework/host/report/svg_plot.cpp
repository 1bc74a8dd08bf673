// SVG line plots and bar charts drawn by hand (gnuplot and plotting libraries are not
// dependencies): linear axes with round ticks, a legend, one colour per series.

#include "report/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace bertlab {

namespace {

// Plot area margins, in pixels: room for tick labels (left, bottom), the title (top) and the
// legend (right).
constexpr double kLeft = 72;
constexpr double kRight = 170;
constexpr double kTop = 34;
constexpr double kBottom = 48;
constexpr const char* kFont = "font-family=\"sans-serif\"";

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

/// Maps data coordinates to pixels inside the plot area.
struct Frame {
  double x0, x1, y0, y1;            // data range of the axes
  double left, right, top, bottom;  // pixels
  double px(double x) const { return left + (x - x0) / (x1 - x0) * (right - left); }
  double py(double y) const { return bottom - (y - y0) / (y1 - y0) * (bottom - top); }
};

std::string number(double v) { return fmt::format("{:.2f}", v); }

std::string svg_open(const PlotOptions& o) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" {2} font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{3}\" y=\"20\" text-anchor=\"middle\" font-size=\"15\" "
      "font-weight=\"bold\">{4}</text>\n",
      o.width, o.height, kFont, number(kLeft + (o.width - kLeft - kRight) / 2),
      xml_escape(o.title));
}

/// Grid lines, tick labels, the axis frame and the axis labels. With `log_y` the y ticks are
/// exponents of ten.
std::string axes(const PlotOptions& o, const Frame& f, const std::vector<double>& xt,
                 const std::vector<double>& yt, bool x_ticks, bool log_y) {
  std::string out;
  const double ys = yt.size() > 1 ? yt[1] - yt[0] : 1.0;
  for (double y : yt) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#e0e0e0\"/>"
        "<text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        number(f.left), number(f.py(y)), number(f.right), number(f.left - 6), number(f.py(y) + 4),
        xml_escape(log_y ? fmt::format("1e{}", std::lround(y)) : format_tick(y, ys)));
  }
  if (x_ticks) {
    const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1.0;
    for (double x : xt) {
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#e0e0e0\"/>"
          "<line x1=\"{0}\" y1=\"{2}\" x2=\"{0}\" y2=\"{3}\" stroke=\"black\"/>"
          "<text x=\"{0}\" y=\"{4}\" text-anchor=\"middle\">{5}</text>\n",
          number(f.px(x)), number(f.top), number(f.bottom), number(f.bottom + 4),
          number(f.bottom + 17), xml_escape(format_tick(x, xs)));
    }
  }
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n",
      number(f.left), number(f.top), number(f.right - f.left), number(f.bottom - f.top));
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     number((f.left + f.right) / 2), number(o.height - 10), xml_escape(o.x_label));
  const double mid = (f.top + f.bottom) / 2;
  out += fmt::format(
      "<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0})\">{1}"
      "</text>\n",
      number(mid), xml_escape(o.y_label));
  return out;
}

/// Dash pattern of series i: variants that agree (the point of a regression comparison) draw
/// on top of each other, and the gaps of the later ones let the earlier ones show through.
std::string series_dash(size_t i) {
  static const char* const kDashes[] = {"", "7 4", "2 3", "9 3 2 3", "4 4"};
  const char* dash = kDashes[i % 5];
  return *dash == '\0' ? std::string() : fmt::format(" stroke-dasharray=\"{}\"", dash);
}

/// Legend entries: a line sample (dashed as the series) or a filled swatch (bars).
std::string legend(const PlotOptions& o, const std::vector<PlotSeries>& series, bool lines) {
  std::string out;
  const double x = o.width - kRight + 14;
  for (size_t i = 0; i < series.size(); ++i) {
    const double y = kTop + 10 + 18.0 * static_cast<double>(i);
    if (lines) {
      out += fmt::format(
          "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>",
          number(x), number(y - 4), number(x + 16), number(y - 4), series_colour(i),
          series_dash(i));
    } else {
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"8\" fill=\"{}\"/>",
                         number(x), number(y - 8), series_colour(i));
    }
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", number(x + 22), number(y),
                       xml_escape(series[i].name));
  }
  return out;
}

/// Where a line plot draws value y on its y axis: y itself, or with log_y its base-10
/// logarithm, no lower than y_floor's. NaN for a value not drawn on the axis (non-finite).
double axis_y(const PlotOptions& o, double y) {
  if (!o.log_y) return y;
  if (!std::isfinite(y)) return std::numeric_limits<double>::quiet_NaN();
  const double floor = o.y_floor > 0 && std::isfinite(o.y_floor) ? o.y_floor : 1e-12;
  return std::log10(std::max(y, floor));
}

/// Powers of ten (their exponents) covering [lo, hi] (exponents), about eight at most.
std::vector<double> decade_ticks(double lo, double hi) {
  const double first = std::floor(lo);
  const double last = std::max(std::ceil(hi), first + 1);
  const double step = std::max(1.0, std::ceil((last - first) / 8));
  std::vector<double> ticks = {first};
  while (ticks.back() < last) ticks.push_back(ticks.back() + step);
  return ticks;
}

/// A non-finite value of series k on a log plot: a triangle on the top edge, labelled.
std::string non_finite_marker(const Frame& f, double x, double y, size_t k) {
  const double px = f.px(x);
  const char* colour = series_colour(k);
  return fmt::format(
      "<path d=\"M{0},{1} L{2},{3} L{4},{3} Z\" fill=\"{5}\"/>"
      "<text x=\"{6}\" y=\"{7}\" font-size=\"10\" fill=\"{5}\">{8}</text>\n",
      number(px), number(f.top + 6), number(px - 4), number(f.top - 2), number(px + 4), colour,
      number(px + 6), number(f.top + 12 + 11 * static_cast<double>(k)),
      std::isnan(y) ? "nan" : "inf");
}

Frame frame_for(const PlotOptions& o, const std::vector<double>& xt,
                const std::vector<double>& yt) {
  return Frame{xt.front(), xt.back(),        yt.front(), yt.back(),
               kLeft,      o.width - kRight, kTop,       o.height - kBottom};
}

}  // namespace

const char* series_colour(size_t i) {
  // Tableau 10: distinguishable, also in grey-scale print.
  static const char* const kColours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                         "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColours[i % 10];
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters other than tab and newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += "\xEF\xBF\xBD";  // U+FFFD
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (lo > hi) std::swap(lo, hi);
  // Beyond this the range itself (hi - lo) and the tick arithmetic would overflow.
  constexpr double kLimit = 1e300;
  lo = std::clamp(lo, -kLimit, kLimit);
  hi = std::clamp(hi, -kLimit, kLimit);
  if (hi - lo <= std::abs(hi) * 1e-12 || hi == lo) {
    // A constant: a small range around it.
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  if (!(hi > lo)) {  // a subnormal constant: its padding rounded away
    lo -= 1.0;
    hi += 1.0;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  if (!(step > 0) || !std::isfinite(step)) return {lo, hi};
  const double first = std::floor(lo / step);
  const double last = std::ceil(hi / step);
  std::vector<double> ticks;
  for (double k = first; k <= last && ticks.size() < 100; k += 1) ticks.push_back(k * step);
  if (ticks.size() < 2) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string format_tick(double v, double spacing) {
  if (std::abs(v) < std::abs(spacing) * 1e-9) v = 0.0;  // no "-0" or 1e-17 for zero
  const double a = std::abs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) return fmt::format("{:.3g}", v);
  const int decimals =
      spacing > 0 ? std::clamp(static_cast<int>(-std::floor(std::log10(spacing) + 1e-9)), 0, 6) : 3;
  return fmt::format("{:.{}f}", v, decimals);
}

namespace {

/// The shaded area between s.lo and s.hi, one polygon per stretch of finite bounds.
std::string band(const PlotOptions& o, const Frame& f, const PlotSeries& s, const char* colour) {
  const size_t n = std::min({s.x.size(), s.lo.size(), s.hi.size()});
  std::string out;
  std::vector<std::pair<double, double>> upper, lower;  // [point of the stretch] pixels
  auto flush = [&] {
    if (upper.size() > 1) {
      std::string points;
      for (const auto& [x, y] : upper) points += fmt::format("{},{} ", number(x), number(y));
      for (auto it = lower.rbegin(); it != lower.rend(); ++it) {
        points += fmt::format("{},{} ", number(it->first), number(it->second));
      }
      points.pop_back();
      out += fmt::format(
          "<polygon fill=\"{}\" fill-opacity=\"0.18\" stroke=\"none\" points=\"{}\"/>\n", colour,
          points);
    }
    upper.clear();
    lower.clear();
  };
  for (size_t i = 0; i < n; ++i) {
    const double lo = axis_y(o, s.lo[i]);
    const double hi = axis_y(o, s.hi[i]);
    if (!std::isfinite(s.x[i]) || !std::isfinite(lo) || !std::isfinite(hi)) {
      flush();
      continue;
    }
    upper.emplace_back(f.px(s.x[i]), f.py(hi));
    lower.emplace_back(f.px(s.x[i]), f.py(lo));
  }
  flush();
  return out;
}

}  // namespace

std::string render_line_plot(const PlotOptions& o, const std::vector<PlotSeries>& series) {
  Range xr, yr;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      const double y = axis_y(o, s.y[i]);
      // A log plot marks non-finite values at their x.
      if (o.log_y && std::isfinite(s.x[i])) xr.add(s.x[i]);
      if (!std::isfinite(s.x[i]) || !std::isfinite(y)) continue;
      xr.add(s.x[i]);
      yr.add(y);
      for (const auto* bound : {&s.lo, &s.hi}) {
        if (i < bound->size() && std::isfinite(axis_y(o, (*bound)[i]))) {
          yr.add(axis_y(o, (*bound)[i]));
        }
      }
    }
  }
  std::string out = svg_open(o);
  if (xr.empty()) {
    const std::vector<double> unit = {0.0, 1.0};
    out += axes(o, frame_for(o, unit, unit), unit, {}, false, false);
    out +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n",
                    number(kLeft + (o.width - kLeft - kRight) / 2), number(o.height / 2.0));
    return out + legend(o, series, true) + "</svg>\n";
  }
  if (yr.empty()) {  // a log plot of non-finite values only
    yr.add(axis_y(o, 0.0));
    yr.add(0.0);
  }
  const std::vector<double> xt = nice_ticks(xr.lo, xr.hi, 8);
  const std::vector<double> yt = o.log_y ? decade_ticks(yr.lo, yr.hi) : nice_ticks(yr.lo, yr.hi, 5);
  const Frame f = frame_for(o, xt, yt);
  out += axes(o, f, xt, yt, true, o.log_y);
  for (size_t k = 0; k < series.size(); ++k) out += band(o, f, series[k], series_colour(k));
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const char* colour = series_colour(k);
    const size_t n = std::min(s.x.size(), s.y.size());
    // Polylines between breaks at non-finite values; markers when the points are few.
    std::string points;
    size_t in_line = 0;
    auto flush = [&] {
      if (in_line > 1) {
        out += fmt::format(
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"{} points=\"{}\"/>\n",
            colour, series_dash(k), points);
      }
      points.clear();
      in_line = 0;
    };
    for (size_t i = 0; i < n; ++i) {
      const double y = axis_y(o, s.y[i]);
      if (!std::isfinite(s.x[i]) || !std::isfinite(y)) {
        flush();
        if (o.log_y && std::isfinite(s.x[i])) out += non_finite_marker(f, s.x[i], s.y[i], k);
        continue;
      }
      points +=
          fmt::format("{}{},{}", points.empty() ? "" : " ", number(f.px(s.x[i])), number(f.py(y)));
      ++in_line;
      if (n <= 40) {
        out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>\n",
                           number(f.px(s.x[i])), number(f.py(y)), colour);
      }
    }
    flush();
  }
  return out + legend(o, series, true) + "</svg>\n";
}

std::string render_bar_chart(const PlotOptions& o, const std::vector<std::string>& categories,
                             const std::vector<PlotSeries>& series) {
  Range yr;
  yr.add(0.0);  // bars start at zero
  for (const auto& s : series) {
    for (size_t c = 0; c < categories.size() && c < s.y.size(); ++c) {
      yr.add(s.y[c]);
      if (c < s.lo.size() && std::isfinite(s.lo[c])) yr.add(s.lo[c]);
      if (c < s.hi.size() && std::isfinite(s.hi[c])) yr.add(s.hi[c]);
    }
  }
  const std::vector<double> yt = nice_ticks(yr.lo, yr.hi, 5);
  const std::vector<double> unit = {0.0, 1.0};
  Frame f = frame_for(o, unit, yt);
  std::string out = svg_open(o);
  out += axes(o, f, {}, yt, false, false);
  const double group =
      (f.right - f.left) / static_cast<double>(std::max<size_t>(1, categories.size()));
  const double bar = group * 0.8 / static_cast<double>(std::max<size_t>(1, series.size()));
  for (size_t c = 0; c < categories.size(); ++c) {
    const double g0 = f.left + group * static_cast<double>(c) + group * 0.1;
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       number(g0 + group * 0.4), number(f.bottom + 17), xml_escape(categories[c]));
    for (size_t k = 0; k < series.size(); ++k) {
      if (c >= series[k].y.size() || !std::isfinite(series[k].y[c])) continue;
      const double v = series[k].y[c];
      const double top = std::min(f.py(v), f.py(0.0));
      const double height = std::abs(f.py(v) - f.py(0.0));
      out += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">"
          "<title>{}: {}</title></rect>\n",
          number(g0 + bar * static_cast<double>(k)), number(top), number(bar * 0.92),
          number(height), series_colour(k), xml_escape(series[k].name), fmt::format("{:.4g}", v));
      const auto& lo = series[k].lo;
      const auto& hi = series[k].hi;
      if (c < lo.size() && c < hi.size() && std::isfinite(lo[c]) && std::isfinite(hi[c])) {
        // An error bar with caps at the bar's centre.
        const double x = g0 + bar * (static_cast<double>(k) + 0.46);
        out += fmt::format(
            "<path d=\"M{} {}V{}M{} {}H{}M{} {}H{}\" stroke=\"#222\" stroke-width=\"1.2\" "
            "fill=\"none\"/>\n",
            number(x), number(f.py(lo[c])), number(f.py(hi[c])), number(x - 4), number(f.py(lo[c])),
            number(x + 4), number(x - 4), number(f.py(hi[c])), number(x + 4));
      }
    }
  }
  return out + legend(o, series, false) + "</svg>\n";
}

}  // namespace bertlab
