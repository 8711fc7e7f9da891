// The run report of `sluice run PLAN --report report.html`
// (docs/observability.md): one self-contained HTML file (inline CSS and SVG,
// no script, no network) with images/s over time, the batch-latency histogram
// and percentiles, the per-stage time breakdown, consumer wait over time, the
// online tuner's moves, bad samples, and the machine and plan summary.
//
// RunRecorder samples the loader's Stats() during the run (call Observe from
// the consumer loop; it records at most every `interval` seconds). Memory is
// bounded: at most kMaxPoints points are kept; when full, every other point is
// dropped and the interval doubles, so a long run keeps an even coverage.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sluice/loader.h"

namespace sluice::cli::report {

// One observation of the loader's counters (cumulative since Create).
struct StatsPoint {
  double t = 0;  // seconds since the recorder started
  uint64_t samples = 0, batches = 0;
  double wait_seconds = 0;
  double read_seconds = 0, decode_seconds = 0, kernel_seconds = 0;
  int workers = 0, prefetch = 0;
  int64_t tuner_moves = 0;
  uint64_t bad_samples = 0;
};

class RunRecorder {
 public:
  static constexpr size_t kMaxPoints = 512;
  explicit RunRecorder(double interval_seconds = 0.1);
  // Records a point when `interval` has passed since the last one (or
  // `force`). Calls loader.Stats() only then.
  void Observe(const Loader& loader, bool force = false);
  const std::vector<StatsPoint>& points() const { return points_; }
  double interval() const { return interval_; }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_, last_;
  double interval_;
  std::vector<StatsPoint> points_;
};

struct ReportData {
  std::string title;                                         // e.g. the plan name
  std::vector<std::pair<std::string, std::string>> plan;     // plan summary rows
  std::vector<std::pair<std::string, std::string>> machine;  // machine summary rows
  std::vector<std::pair<std::string, std::string>> result;   // the run's totals
  std::vector<StatsPoint> series;
  std::vector<double> latencies;  // seconds (the loader's recent batch latencies)
  LoaderStats final_stats;
  double elapsed = 0;           // seconds of the run
  std::vector<BadSample> bad;   // listed (the caller bounds the count)
  uint64_t bad_not_listed = 0;  // bad samples beyond `bad`
  std::vector<std::string> warnings;
};

// The machine summary rows: host, CPU model and cores, memory, OS.
std::vector<std::pair<std::string, std::string>> MachineSummary();

// The whole HTML document.
std::string RenderReport(const ReportData& data);

// Writes RenderReport(data) to `path`; false (message in `error`) on failure.
bool WriteReport(const std::string& path, const ReportData& data, std::string& error);

}  // namespace sluice::cli::report
