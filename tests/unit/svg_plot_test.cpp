// The SVG plotting module and the run-output readers of the report: ticks, escaping, one line
// per variant, breaks at missing values, and clear errors for malformed metrics.jsonl.

#include <bertlab/error.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

#include "report/run_outputs.h"
#include "report/svg_plot.h"

namespace bertlab {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgPlot, TicksAreRoundAndCoverTheRange) {
  const std::vector<double> t = nice_ticks(0.37, 9.2, 5);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 0.37);
  EXPECT_GE(t.back(), 9.2);
  const double step = t[1] - t[0];
  EXPECT_DOUBLE_EQ(step, 2.0);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_NEAR(t[i] - t[i - 1], step, 1e-12);
  // A constant gets a range around it; tiny values get a tiny step.
  const std::vector<double> c = nice_ticks(3.0, 3.0);
  EXPECT_LT(c.front(), 3.0);
  EXPECT_GT(c.back(), 3.0);
  const std::vector<double> small = nice_ticks(1e-5, 5e-5, 4);
  EXPECT_NEAR(small[1] - small[0], 1e-5, 1e-18);
  // Values near the double range still give finite ticks.
  for (double v : nice_ticks(-1e308, 1e308)) EXPECT_TRUE(std::isfinite(v));
  const std::vector<double> subnormal = nice_ticks(5e-324, 5e-324);
  ASSERT_GE(subnormal.size(), 2u);
  EXPECT_LT(subnormal.front(), subnormal.back());
}

TEST(SvgPlot, TickLabelsHaveTheStepsDecimals) {
  EXPECT_EQ(format_tick(0.5, 0.5), "0.5");
  EXPECT_EQ(format_tick(20, 5), "20");
  EXPECT_EQ(format_tick(0.0015, 0.0005), "0.0015");
  EXPECT_EQ(format_tick(-1e-17, 0.1), "0.0");  // no "-0.0" from rounding
  EXPECT_EQ(format_tick(2e-5, 1e-5), "2e-05");
  EXPECT_EQ(format_tick(3e6, 1e6), "3e+06");
}

TEST(SvgPlot, TextIsEscaped) {
  EXPECT_EQ(xml_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
  EXPECT_EQ(xml_escape(std::string("x\x01y")), "x\xEF\xBF\xBDy");
  PlotOptions o;
  o.title = "loss <train>";
  const std::string svg = render_line_plot(o, {{"a&b", {1, 2}, {1, 2}}});
  EXPECT_NE(svg.find("loss &lt;train&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">a&amp;b</text>"), std::string::npos);
  EXPECT_EQ(svg.find("a&b"), std::string::npos);
}

TEST(SvgPlot, OneLineAndColourPerVariantOnSharedAxes) {
  PlotOptions o;
  o.title = "Training loss";
  o.x_label = "step";
  const std::vector<PlotSeries> series = {
      {"single", {10, 20, 30}, {0.9, 0.7, 0.5}},
      {"mirrored-2", {10, 20, 30}, {0.95, 0.72, 0.52}},
      {"sparse", {10, 20, 30}, {1.5, 1.1, 0.8}},
  };
  const std::string svg = render_line_plot(o, series);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NE(svg.find(std::string("stroke=\"") + series_colour(i) + "\""), std::string::npos);
    EXPECT_NE(svg.find(">" + series[i].name + "</text>"), std::string::npos);
  }
  EXPECT_STRNE(series_colour(0), series_colour(1));
  // Variants that agree overlap: the second and third are dashed (line and legend sample), so
  // the first shows through.
  EXPECT_EQ(count(svg, "stroke-dasharray"), 4u);
  EXPECT_NE(svg.find("stroke-dasharray=\"7 4\" points="), std::string::npos);
  // The y axis spans every series: its ticks reach 1.5 and go down to 0.5 or below.
  EXPECT_NE(svg.find(">1.6</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">0.4</text>"), std::string::npos) << svg;
  // x ticks every 5 steps (round), from 10 to 30.
  EXPECT_NE(svg.find(">10</text>"), std::string::npos);
  EXPECT_NE(svg.find(">30</text>"), std::string::npos);
  // Every coordinate is a finite number inside the image.
  const std::regex point(R"((\d+\.\d+),(\d+\.\d+))");
  size_t points = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), point); it != std::sregex_iterator();
       ++it) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    EXPECT_GE(x, 0);
    EXPECT_LE(x, o.width);
    EXPECT_GE(y, 0);
    EXPECT_LE(y, o.height);
    ++points;
  }
  EXPECT_EQ(points, 9u);
}

TEST(SvgPlot, MissingValuesBreakTheLine) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string svg =
      render_line_plot({}, {{"v", {1, 2, 3, 4, 5, 6}, {1.0, 2.0, nan, 3.0, 4.0, 5.0}}});
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  const std::string empty = render_line_plot({}, {{"v", {1, 2}, {nan, nan}}});
  EXPECT_NE(empty.find("no data"), std::string::npos);
  EXPECT_EQ(count(empty, "<polyline"), 0u);
}

// gradcheck's difference plots: a log axis with a tick per power of ten, zero drawn at the
// floor, and a non-finite value as a labelled marker on the top edge instead of a gap.
TEST(SvgPlot, LogAxisFloorsZeroAndMarksNonFiniteValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  PlotOptions o;
  o.log_y = true;
  o.y_floor = 1e-12;
  const std::string svg =
      render_line_plot(o, {{"v", {1, 2, 3, 4, 5}, {0.0, 1e-7, 1e-3, inf, nan}}});
  EXPECT_NE(svg.find(">1e-12</text>"), std::string::npos) << svg;  // the floor is on the axis
  EXPECT_NE(svg.find(">1e-2</text>"), std::string::npos) << svg;   // above the largest, 1e-3
  EXPECT_EQ(svg.find(">1e-14</text>"), std::string::npos) << svg;
  EXPECT_EQ(count(svg, "<circle"), 3u);  // 0 (at the floor), 1e-7, 1e-3
  EXPECT_EQ(count(svg, "<polyline"), 1u);
  EXPECT_EQ(count(svg, ">inf</text>"), 1u);
  EXPECT_EQ(count(svg, ">nan</text>"), 1u);
  // Without log_y the same values give no decade ticks.
  PlotOptions linear;
  EXPECT_EQ(render_line_plot(linear, {{"v", {1, 2, 3}, {0.0, 1e-7, 1e-3}}}).find(">1e-12</text>"),
            std::string::npos);
}

TEST(SvgPlot, BarChartHasABarPerVariantAndMetric) {
  const std::string svg =
      render_bar_chart({}, {"eval_accuracy", "f1"}, {{"a", {}, {0.5, 0.6}}, {"b", {}, {0.7, 0.8}}});
  EXPECT_EQ(count(svg, "<rect x="), 4u + 1u + 2u);  // bars, the plot frame, legend swatches
  EXPECT_NE(svg.find("<title>b: 0.8</title>"), std::string::npos);
  EXPECT_NE(svg.find(">eval_accuracy</text>"), std::string::npos);
}

// Spread over seeds: a shaded band per line (broken where a bound is missing) that the y axis
// covers, and an error bar per bar.
TEST(SvgPlot, BandsAndErrorBarsShowTheSpread) {
  PlotSeries s;
  s.name = "adam";
  s.x = {1, 2, 3, 4};
  s.y = {1.0, 2.0, 3.0, 4.0};
  s.lo = {0.5, 1.5, std::nan(""), 3.5};
  s.hi = {1.5, 9.0, std::nan(""), 4.5};
  PlotOptions o;
  const std::string svg = render_line_plot(o, {s});
  // Points 1–2 make one band; point 3 has none; point 4 alone is no area.
  EXPECT_EQ(count(svg, "<polygon"), 1u) << svg;
  EXPECT_NE(svg.find("fill-opacity=\"0.18\""), std::string::npos);
  // The axis reaches the band's top (9), not only the line's (4).
  EXPECT_NE(svg.find(">8</text>"), std::string::npos) << svg;
  PlotSeries without = s;
  without.lo.clear();
  without.hi.clear();
  EXPECT_EQ(count(render_line_plot(o, {without}), "<polygon"), 0u);
  PlotSeries bars;
  bars.name = "adam";
  bars.y = {0.8, 0.5};
  bars.lo = {0.7, std::nan("")};
  bars.hi = {0.9, std::nan("")};
  const std::string chart = render_bar_chart(o, {"accuracy", "f1"}, {bars});
  EXPECT_EQ(count(chart, "stroke=\"#222\""), 1u) << chart;  // one error bar: f1 has no spread
}

TEST(RunOutputs, MetricsLinesReadWithNullAsNaN) {
  const auto lines = parse_metrics_jsonl(
      "{\"step\":10,\"loss\":0.5,\"note\":\"x\"}\n\n{\"step\":20,\"loss\":null}\n", "m.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].step, 10);
  EXPECT_DOUBLE_EQ(lines[0].values.at("loss"), 0.5);
  EXPECT_EQ(lines[0].values.count("note"), 0u);
  EXPECT_TRUE(std::isnan(lines[1].values.at("loss")));
}

TEST(RunOutputs, MalformedLinesNameFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      parse_metrics_jsonl(text, "runs/x/v/metrics.jsonl");
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string what = "; rerun the variant, or leave its folder out of the comparison";
  EXPECT_EQ(message("{\"step\":1}\n{\"step\":2,\n"),
            "runs/x/v/metrics.jsonl:2: not valid JSON" + what);
  EXPECT_EQ(message("[1]\n"), "runs/x/v/metrics.jsonl:1: not a JSON object" + what);
  EXPECT_NE(message("{\"loss\":1}\n").find("metrics.jsonl:1: no \"step\""), std::string::npos);
  EXPECT_NE(message("{\"step\":-3}\n").find("non-negative integer"), std::string::npos);
  EXPECT_THROW(parse_eval_results("3", "eval_results.json"), DataError);
  const Metrics eval =
      parse_eval_results("{\"eval_accuracy\":0.5,\"global_step\":3,\"f1\":0.25}", "e.json");
  ASSERT_EQ(eval.size(), 2u);
  EXPECT_EQ(eval[0].first, "eval_accuracy");
  EXPECT_EQ(eval[1].first, "f1");
}

}  // namespace
}  // namespace bertlab
