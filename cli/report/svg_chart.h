// Inline SVG charts for the run report (cli/report/run_report.h): no
// JavaScript, no external resources. Each chart is one <svg class="chart">
// element with a fixed pixel size, axes with round-number ticks, grid lines,
// a title and a legend; the report's headless-browser test
// (tests/cli/report_browser_test.py) looks for these elements.
#pragma once

#include <string>
#include <vector>

namespace sluice::cli::report {

struct Point {
  double x = 0, y = 0;
};

struct Series {
  std::string name;
  std::string color;  // CSS color
  std::vector<Point> points;
  bool step = false;  // draw as a step function (knob values)
  bool area = false;  // fill down to y = 0
};

struct ChartFrame {
  std::string id;  // the svg element's id
  std::string title;
  std::string x_label, y_label;
  int width = 760, height = 260;
};

// A line (or step) chart of `series` over a shared x axis. With no points it
// draws the axes and "no data".
std::string LineChart(const ChartFrame& frame, const std::vector<Series>& series);

// Vertical bars over [edges[i], edges[i+1]) with heights `counts`, plus
// labelled vertical markers (e.g. percentiles) at `markers`.
struct Marker {
  std::string label;
  double x = 0;
  std::string color;
};
std::string Histogram(const ChartFrame& frame, const std::vector<double>& edges,
                      const std::vector<double>& counts, const std::vector<Marker>& markers);

// Horizontal bars: one row per (label, value), value printed at the bar's end
// with `unit`, and each row's share of the total.
struct Bar {
  std::string label;
  double value = 0;
  std::string color;
};
std::string HorizontalBars(const ChartFrame& frame, const std::vector<Bar>& bars,
                           const std::string& unit);

// Round tick values covering [lo, hi] (about `target` of them: 1, 2, 5 x 10^k steps).
std::vector<double> NiceTicks(double lo, double hi, int target = 5);
// Text escaped for HTML/SVG content and attribute values.
std::string Escape(const std::string& text);
// A number with `digits` significant-looking decimals, trailing zeros trimmed.
std::string Num(double v, int digits = 2);

}  // namespace sluice::cli::report
