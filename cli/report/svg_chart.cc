// SVG charts: see svg_chart.h.
#include "cli/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace sluice::cli::report {
namespace {

constexpr int kLeft = 64, kRight = 16, kTop = 46, kBottom = 44;

struct Plot {
  double x0, x1, y0, y1;  // data range
  int w, h;               // svg size
  double X(double x) const {
    return kLeft + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (w - kLeft - kRight);
  }
  double Y(double y) const {
    return h - kBottom - (y1 > y0 ? (y - y0) / (y1 - y0) : 0.0) * (h - kTop - kBottom);
  }
};

std::string Open(const ChartFrame& f) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<svg class=\"chart\" id=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                "height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">",
                Escape(f.id).c_str(), f.width, f.height, f.width, f.height);
  std::string s = buf;
  s += "<title>" + Escape(f.title) + "</title>";
  s += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(f.width) + "\" height=\"" +
       std::to_string(f.height) + "\" fill=\"#fff\"/>";
  s += "<text x=\"" + std::to_string(kLeft) + "\" y=\"20\" class=\"ctitle\">" + Escape(f.title) +
       "</text>";
  return s;
}

// Axes, grid lines, ticks and axis labels for `p`.
std::string Axes(const ChartFrame& f, const Plot& p, const std::vector<double>& xt,
                 const std::vector<double>& yt) {
  std::string s;
  char buf[256];
  for (double y : yt) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                  "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%s</text>",
                  kLeft, f.width - kRight, p.Y(y), p.Y(y), kLeft - 6, p.Y(y) + 4, Num(y).c_str());
    s += buf;
  }
  for (double x : xt) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" class=\"axis\"/>"
                  "<text x=\"%.1f\" y=\"%d\" class=\"tick\" text-anchor=\"middle\">%s</text>",
                  p.X(x), p.X(x), f.height - kBottom, f.height - kBottom + 4, p.X(x),
                  f.height - kBottom + 17, Num(x).c_str());
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" class=\"axis\"/>"
                "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" class=\"axis\"/>",
                kLeft, f.width - kRight, f.height - kBottom, f.height - kBottom, kLeft, kLeft, kTop,
                f.height - kBottom);
  s += buf;
  s += "<text x=\"" + std::to_string((kLeft + f.width - kRight) / 2) + "\" y=\"" +
       std::to_string(f.height - 8) + "\" class=\"label\" text-anchor=\"middle\">" +
       Escape(f.x_label) + "</text>";
  s += "<text transform=\"translate(14," + std::to_string((kTop + f.height - kBottom) / 2) +
       ") rotate(-90)\" class=\"label\" text-anchor=\"middle\">" + Escape(f.y_label) + "</text>";
  return s;
}

std::string Legend(const ChartFrame& f,
                   const std::vector<std::pair<std::string, std::string>>& items) {
  std::string s;
  double x = f.width - kRight;
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    x -= 14 + 7.0 * static_cast<double>(it->first.size()) + 16;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"27\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                  "<text x=\"%.1f\" y=\"36\" class=\"tick\">",
                  x, Escape(it->second).c_str(), x + 14);
    s += buf;
    s += Escape(it->first) + "</text>";
  }
  return s;
}

std::string NoData(const ChartFrame& f) {
  return "<text x=\"" + std::to_string(f.width / 2) + "\" y=\"" + std::to_string(f.height / 2) +
         "\" class=\"label\" text-anchor=\"middle\">no data</text>";
}

}  // namespace

std::string Escape(const std::string& text) {
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
        out += c;
    }
  }
  return out;
}

std::string Num(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  if (std::fabs(v) >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s = buf;
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

std::string LineChart(const ChartFrame& f, const std::vector<Series>& series) {
  double x0 = std::numeric_limits<double>::max(), x1 = -x0, y1 = 0;
  size_t n = 0;
  for (const Series& s : series) {
    for (const Point& p : s.points) {
      x0 = std::min(x0, p.x);
      x1 = std::max(x1, p.x);
      y1 = std::max(y1, p.y);
      ++n;
    }
  }
  std::string out = Open(f);
  if (n == 0) {
    Plot p{0, 1, 0, 1, f.width, f.height};
    out += Axes(f, p, NiceTicks(0, 1), NiceTicks(0, 1)) + NoData(f) + "</svg>";
    return out;
  }
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= 0) y1 = 1;
  const std::vector<double> yt = NiceTicks(0, y1 * 1.05);
  Plot p{x0, x1, 0, std::max(yt.back(), y1), f.width, f.height};
  out += Axes(f, p, NiceTicks(x0, x1, 8), yt);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const Series& s : series) {
    legend.emplace_back(s.name, s.color);
    if (s.points.empty()) continue;
    std::string d;
    char buf[96];
    for (size_t i = 0; i < s.points.size(); ++i) {
      const Point& pt = s.points[i];
      if (i > 0 && s.step) {
        std::snprintf(buf, sizeof buf, "L%.1f,%.1f", p.X(pt.x), p.Y(s.points[i - 1].y));
        d += buf;
      }
      std::snprintf(buf, sizeof buf, "%c%.1f,%.1f", i == 0 ? 'M' : 'L', p.X(pt.x), p.Y(pt.y));
      d += buf;
    }
    if (s.area) {
      std::snprintf(buf, sizeof buf, "L%.1f,%.1fL%.1f,%.1fZ", p.X(s.points.back().x), p.Y(0),
                    p.X(s.points.front().x), p.Y(0));
      out += "<path class=\"series\" d=\"" + d + buf + "\" fill=\"" + Escape(s.color) +
             "\" fill-opacity=\"0.25\" stroke=\"none\"/>";
    }
    out += "<path class=\"series\" d=\"" + d + "\" fill=\"none\" stroke=\"" + Escape(s.color) +
           "\" stroke-width=\"2\"><title>" + Escape(s.name) + "</title></path>";
  }
  out += Legend(f, legend) + "</svg>";
  return out;
}

std::string Histogram(const ChartFrame& f, const std::vector<double>& edges,
                      const std::vector<double>& counts, const std::vector<Marker>& markers) {
  std::string out = Open(f);
  if (counts.empty() || edges.size() != counts.size() + 1) {
    Plot p{0, 1, 0, 1, f.width, f.height};
    out += Axes(f, p, NiceTicks(0, 1), NiceTicks(0, 1)) + NoData(f) + "</svg>";
    return out;
  }
  const double top = std::max(1.0, *std::max_element(counts.begin(), counts.end()));
  const std::vector<double> yt = NiceTicks(0, top * 1.1);
  Plot p{edges.front(), edges.back(), 0, std::max(yt.back(), top), f.width, f.height};
  out += Axes(f, p, NiceTicks(edges.front(), edges.back(), 8), yt);
  char buf[320];
  for (size_t i = 0; i < counts.size(); ++i) {
    const double xa = p.X(edges[i]), xb = p.X(edges[i + 1]);
    std::snprintf(buf, sizeof buf,
                  "<rect class=\"bar\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                  "fill=\"#4e79a7\"><title>%s-%s: %s</title></rect>",
                  xa + 0.5, p.Y(counts[i]), std::max(0.5, xb - xa - 1), p.Y(0) - p.Y(counts[i]),
                  Num(edges[i]).c_str(), Num(edges[i + 1]).c_str(), Num(counts[i], 0).c_str());
    out += buf;
  }
  std::vector<std::pair<std::string, std::string>> legend;
  for (const Marker& m : markers) {
    std::snprintf(
        buf, sizeof buf,
        "<line class=\"marker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" "
        "stroke-width=\"2\" stroke-dasharray=\"4 3\"/>",
        p.X(m.x), p.X(m.x), kTop, f.height - kBottom, Escape(m.color).c_str());
    out += buf;
    legend.emplace_back(m.label + " " + Num(m.x), m.color);
  }
  out += Legend(f, legend) + "</svg>";
  return out;
}

std::string HorizontalBars(const ChartFrame& f, const std::vector<Bar>& bars,
                           const std::string& unit) {
  std::string out = Open(f);
  double total = 0, top = 0;
  for (const Bar& b : bars) {
    total += b.value;
    top = std::max(top, b.value);
  }
  if (bars.empty() || top <= 0) return out + NoData(f) + "</svg>";
  const int label_w = 150,
            row_h = std::max(18, (f.height - kTop - 10) / static_cast<int>(bars.size()));
  const double scale = (f.width - label_w - 130) / top;
  char buf[512];
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const int y = kTop + static_cast<int>(i) * row_h;
    const double w = std::max(1.0, b.value * scale);
    std::snprintf(buf, sizeof buf,
                  "<text x=\"%d\" y=\"%d\" class=\"tick\" text-anchor=\"end\">%s</text>"
                  "<rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>"
                  "<text x=\"%.1f\" y=\"%d\" class=\"tick\">%s %s (%s%%)</text>",
                  label_w - 8, y + row_h / 2 + 4, Escape(b.label).c_str(), label_w, y + 3, w,
                  row_h - 6, Escape(b.color).c_str(), label_w + w + 6, y + row_h / 2 + 4,
                  Num(b.value).c_str(), Escape(unit).c_str(),
                  Num(total > 0 ? 100.0 * b.value / total : 0, 1).c_str());
    out += buf;
  }
  return out + "</svg>";
}

}  // namespace sluice::cli::report
