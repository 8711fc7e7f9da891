// The run report: see run_report.h.
#include "cli/report/run_report.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/report/svg_chart.h"
#include "common/usable_cores.h"

namespace sluice::cli::report {
namespace {

// The first value of `key` ("key : value" lines) in a /proc file, or "".
std::string ProcValue(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key)) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "";
}

std::string Table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string s = "<table class=\"kv\">";
  for (const auto& [k, v] : rows) {
    s += "<tr><th>" + Escape(k) + "</th><td>" + Escape(v) + "</td></tr>";
  }
  return s + "</table>";
}

// Nearest-rank quantile of sorted `v`.
double Quantile(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

// Rates between consecutive points: (t at the interval's end, f(a, b) / dt).
template <typename F>
std::vector<Point> Rates(const std::vector<StatsPoint>& s, F f) {
  std::vector<Point> out;
  for (size_t i = 1; i < s.size(); ++i) {
    const double dt = s[i].t - s[i - 1].t;
    if (dt > 0) out.push_back({s[i].t, f(s[i - 1], s[i]) / dt});
  }
  return out;
}

std::string ThroughputSection(const ReportData& d) {
  ChartFrame f{"chart-throughput", "Images per second (per sampling interval)", "seconds",
               "images/s"};
  Series s{"images/s", "#4e79a7",
           Rates(d.series,
                 [](const StatsPoint& a, const StatsPoint& b) {
                   return static_cast<double>(b.samples - a.samples);
                 }),
           false, true};
  return "<h2>Throughput</h2>" + LineChart(f, {s});
}

std::string WaitSection(const ReportData& d) {
  ChartFrame f{"chart-wait", "Consumer wait: share of each interval spent blocked in Next()",
               "seconds", "% waiting"};
  Series s{"consumer wait %", "#e15759",
           Rates(d.series,
                 [](const StatsPoint& a, const StatsPoint& b) {
                   return 100.0 * (b.wait_seconds - a.wait_seconds);
                 }),
           false, true};
  return "<h2>Consumer wait</h2>" + LineChart(f, {s}) +
         "<p>Total: " + Num(d.final_stats.consumer_wait_seconds) + " s of " + Num(d.elapsed) +
         " s (" +
         Num(d.elapsed > 0 ? 100.0 * d.final_stats.consumer_wait_seconds / d.elapsed : 0, 1) +
         "%). Near 0%: the loader keeps up; near 100%: the trainer waits for input.</p>";
}

std::string LatencySection(const ReportData& d) {
  std::vector<double> ms;
  for (double s : d.latencies) ms.push_back(s * 1e3);
  std::sort(ms.begin(), ms.end());
  std::vector<double> edges, counts;
  std::vector<Marker> markers;
  if (!ms.empty()) {
    const int bins = 30;
    const double hi = std::max(ms.back() * 1.0001, 1e-3);
    for (int i = 0; i <= bins; ++i) edges.push_back(hi * i / bins);
    counts.assign(bins, 0);
    for (double v : ms) counts[std::min(bins - 1, static_cast<int>(v / hi * bins))] += 1;
    markers = {{"p50", Quantile(ms, 0.5), "#59a14f"},
               {"p90", Quantile(ms, 0.9), "#f28e2b"},
               {"p99", Quantile(ms, 0.99), "#e15759"}};
  }
  ChartFrame f{"chart-latency", "Batch latency (first sample started to last sample written)",
               "milliseconds", "batches"};
  std::string s = "<h2>Batch latency</h2>" + Histogram(f, edges, counts, markers);
  s += Table(
      {{"batches measured", std::to_string(ms.size()) + " (the loader keeps the latest 4096)"},
       {"p50", Num(Quantile(ms, 0.5)) + " ms"},
       {"p90", Num(Quantile(ms, 0.9)) + " ms"},
       {"p99", Num(Quantile(ms, 0.99)) + " ms"},
       {"max", Num(d.final_stats.latency_max * 1e3) + " ms (whole run)"}});
  return s;
}

std::string StageSection(const ReportData& d) {
  const LoaderStats& st = d.final_stats;
  std::vector<Bar> bars = {{"read", st.read_seconds, "#76b7b2"},
                           {"decode", st.decode_seconds, "#4e79a7"},
                           {"kernel", st.kernel_seconds, "#f28e2b"},
                           {"consumer wait", st.consumer_wait_seconds, "#e15759"}};
  ChartFrame f{"chart-stages", "Where the time went (worker stages summed over workers)", "", ""};
  f.height = 170;
  std::string s = "<h2>Per-stage time</h2>" + HorizontalBars(f, bars, "s");
  ChartFrame g{"chart-stages-time", "Worker busy time per second of run, by stage", "seconds",
               "worker-seconds per second"};
  auto rate = [&](double StatsPoint::*m) {
    return Rates(d.series, [m](const StatsPoint& a, const StatsPoint& b) { return b.*m - a.*m; });
  };
  s += LineChart(g, {{"read", "#76b7b2", rate(&StatsPoint::read_seconds)},
                     {"decode", "#4e79a7", rate(&StatsPoint::decode_seconds)},
                     {"kernel", "#f28e2b", rate(&StatsPoint::kernel_seconds)}});
  if (st.samples > 0) {
    const double n = static_cast<double>(st.samples);
    s += "<p>Per sample: read " + Num(st.read_seconds / n * 1e3, 3) + " ms, decode " +
         Num(st.decode_seconds / n * 1e3, 3) + " ms, kernel " +
         Num(st.kernel_seconds / n * 1e3, 3) + " ms.</p>";
  }
  return s;
}

std::string TunerSection(const ReportData& d) {
  std::vector<Point> workers, prefetch;
  std::vector<std::pair<std::string, std::string>> moves;
  for (size_t i = 0; i < d.series.size(); ++i) {
    const StatsPoint& p = d.series[i];
    workers.push_back({p.t, static_cast<double>(p.workers)});
    prefetch.push_back({p.t, static_cast<double>(p.prefetch)});
    if (i > 0) {
      const StatsPoint& q = d.series[i - 1];
      std::string what;
      if (p.workers != q.workers) {
        what += "workers " + std::to_string(q.workers) + " -> " + std::to_string(p.workers);
      }
      if (p.prefetch != q.prefetch) {
        what += (what.empty() ? "" : ", ") + std::string("prefetch ") + std::to_string(q.prefetch) +
                " -> " + std::to_string(p.prefetch);
      }
      if (!what.empty()) moves.emplace_back("t = " + Num(p.t) + " s", what);
    }
  }
  ChartFrame f{"chart-tuner", "Knobs over time (running workers, batches prefetched)", "seconds",
               "value"};
  std::string s = "<h2>Online tuner</h2>";
  s += "<p>Online tuning " +
       std::string(d.final_stats.online_tuning
                       ? "on: " + std::to_string(d.final_stats.tuner_moves) + " moves in total."
                       : "off (knobs fixed by the plan or the command line).") +
       "</p>";
  s += LineChart(f,
                 {{"workers", "#4e79a7", workers, true}, {"prefetch", "#59a14f", prefetch, true}});
  if (!moves.empty()) s += Table(moves);
  return s;
}

std::string BadSection(const ReportData& d) {
  const LoaderStats& st = d.final_stats;
  std::string s = "<h2>Bad samples</h2><p>" + std::to_string(st.bad_samples) +
                  " distinct bad samples, " + std::to_string(st.bad_reads) +
                  " bad reads (skipped " + std::to_string(st.skipped) + ", replaced " +
                  std::to_string(st.replaced) + ").</p>";
  if (d.bad.empty()) return s;
  s += "<table class=\"list\"><tr><th>epoch</th><th>index</th><th>path</th><th>reason</th></tr>";
  for (const BadSample& b : d.bad) {
    s += "<tr><td>" + std::to_string(b.epoch) + "</td><td>" + std::to_string(b.index) +
         "</td><td>" + Escape(b.path) + "</td><td>" + Escape(b.reason) + "</td></tr>";
  }
  s += "</table>";
  if (d.bad_not_listed > 0) s += "<p>... and " + std::to_string(d.bad_not_listed) + " more.</p>";
  return s;
}

constexpr const char* kStyle = R"(<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:820px;color:#222;background:#fafafa}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
svg.chart{display:block;margin:8px 0;border:1px solid #e3e3e3;background:#fff}
.ctitle{font-size:13px;font-weight:600;fill:#333}.tick{font-size:11px;fill:#555}.label{font-size:12px;fill:#444}
.grid{stroke:#eee}.axis{stroke:#999}
table{border-collapse:collapse;margin:8px 0}th,td{text-align:left;padding:3px 10px;border-bottom:1px solid #eee;vertical-align:top}
table.kv th{color:#555;font-weight:500;white-space:nowrap}table.list td{font-family:monospace;font-size:12px}
.warn{color:#b3461b}.cols{display:flex;gap:24px;flex-wrap:wrap}.cols>div{flex:1;min-width:300px}
</style>)";

}  // namespace

RunRecorder::RunRecorder(double interval_seconds)
    : start_(Clock::now()), last_(start_), interval_(interval_seconds) {
  points_.reserve(kMaxPoints);
}

void RunRecorder::Observe(const Loader& loader, bool force) {
  const Clock::time_point now = Clock::now();
  if (!force && !points_.empty() &&
      std::chrono::duration<double>(now - last_).count() < interval_) {
    return;
  }
  last_ = now;
  const LoaderStats s = loader.Stats();
  StatsPoint p;
  p.t = std::chrono::duration<double>(now - start_).count();
  p.samples = s.samples;
  p.batches = s.batches;
  p.wait_seconds = s.consumer_wait_seconds;
  p.read_seconds = s.read_seconds;
  p.decode_seconds = s.decode_seconds;
  p.kernel_seconds = s.kernel_seconds;
  p.workers = s.in_flight;
  p.prefetch = s.prefetch;
  p.tuner_moves = s.tuner_moves;
  p.bad_samples = s.bad_samples;
  if (points_.size() == kMaxPoints) {
    // Keep every other point (the first and the newest survive) and sample
    // half as often from now on.
    size_t kept = 0;
    for (size_t i = 0; i < points_.size(); i += 2) points_[kept++] = points_[i];
    points_.resize(kept);
    interval_ *= 2;
  }
  points_.push_back(p);
}

std::vector<std::pair<std::string, std::string>> MachineSummary() {
  std::vector<std::pair<std::string, std::string>> rows;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) rows.emplace_back("host", host);
  const std::string cpu = ProcValue("/proc/cpuinfo", "model name");
  rows.emplace_back("CPU", (cpu.empty() ? std::string("unknown") : cpu) + " (" +
                               std::to_string(std::thread::hardware_concurrency()) +
                               " hardware threads, " + std::to_string(UsableCores()) +
                               " usable by this process)");
  const std::string mem = ProcValue("/proc/meminfo", "MemTotal");
  if (!mem.empty()) {
    rows.emplace_back("memory", Num(std::strtod(mem.c_str(), nullptr) / 1048576.0, 1) + " GiB");
  }
  struct utsname u {};
  if (::uname(&u) == 0) {
    rows.emplace_back("OS", std::string(u.sysname) + " " + u.release + " " + u.machine);
  }
  return rows;
}

std::string RenderReport(const ReportData& d) {
  std::string s = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  s += "<title>Sluice run report: " + Escape(d.title) + "</title>";
  s += kStyle;
  s += "</head><body><h1>Sluice run report: " + Escape(d.title) + "</h1>";
  for (const std::string& w : d.warnings) s += "<p class=\"warn\">warning: " + Escape(w) + "</p>";
  s += "<h2>Summary</h2>" + Table(d.result);
  s += ThroughputSection(d) + LatencySection(d) + StageSection(d) + WaitSection(d) +
       TunerSection(d) + BadSection(d);
  s += "<h2>Plan and machine</h2><div class=\"cols\"><div>" + Table(d.plan) + "</div><div>" +
       Table(d.machine) + "</div></div>";
  s += "<p class=\"label\">Written by <code>sluice run --report</code>; the time series samples "
       "the loader's statistics every " +
       Num(d.series.size() > 1 ? d.series[1].t - d.series[0].t : 0, 2) + " s or so (at most " +
       std::to_string(RunRecorder::kMaxPoints) + " points).</p>";
  s += "</body></html>\n";
  return s;
}

bool WriteReport(const std::string& path, const ReportData& data, std::string& error) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  if (!out) {
    error = "cannot open report file `" + path + "`";
    return false;
  }
  out << RenderReport(data);
  out.close();
  if (!out) {
    error = "cannot write report file `" + path + "`";
    return false;
  }
  return true;
}

}  // namespace sluice::cli::report
