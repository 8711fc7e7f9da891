// `sluice run PLAN --var NAME=VALUE ... [--batches N] [--epochs E] [--threads T]
//  [--prefetch P] [--in-flight K] [--rank R --world-size W] [--seed S] [--dct-scaling]
//  [--device cpu|cuda|cuda:N] [--bad-samples FILE] [--trace FILE] [--report FILE]`
//
// Loads the plan, iterates its loader as a trainer would (touching nothing but
// the batch handles) and reports throughput. Progress goes to stderr as a bar
// redrawn in place, on a terminal only (common/progress.h). The
// summary goes to stdout: the device the plan's GPU stages ran on and any
// warnings (e.g. no CUDA device: the CPU path), images/s, batch latency
// p50/p99/max, time the consumer waited, peak RSS (getrusage) and bad-sample
// counts: distinct bad samples (each file or member once per epoch) and bad
// reads (every failed read/decode), then each distinct bad sample of the run
// once (the first 10, with the reason it was first found bad; names and
// reasons escaped for the terminal: report::TerminalSafe). --bad-samples FILE writes each epoch's
// distinct bad samples as JSON lines
//   {"epoch": E, "sample": INDEX, "name": PATH, "reason": TEXT}
// (a PATH that is not UTF-8 has U+FFFD for its bad bytes, and its exact
// bytes in "name_bytes_b64": base64) sorted by epoch, then dataset index: an epoch's lines when
// Next() reports its end, and the last epoch's (complete or not) when the run stops, error
// included. --device sets LoaderOptions::device (a forced cuda that is not
// usable is an error, exit 1).
// --trace FILE records the whole run as Chrome trace-event JSON
// (Loader::StartTrace; open it in https://ui.perfetto.dev or chrome://tracing).
// --report FILE writes a self-contained HTML report (cli/report/run_report.h):
// the loader's statistics sampled during the run, charts as inline SVG.
// Ctrl-C (SIGINT) or SIGTERM stops the run between batches; it then finishes
// as usual (trace, report saying "interrupted", bad-sample list, summary) and
// exits 130. A second signal while it finishes kills it (the default action).
// See docs/observability.md.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cli/cli.h"
#include "cli/report/plain_text.h"
#include "cli/report/run_report.h"
#include "cli/report/svg_chart.h"
#include "common/progress.h"
#include "common/utf8.h"
#include "sluice/sluice.h"

namespace sluice::cli {
namespace {

// Set by SIGINT/SIGTERM during `sluice run`; the batch loop stops when set.
volatile std::sig_atomic_t g_interrupted = 0;

// The first signal asks the run to stop; the handler then gives the signal
// its default action back, so a second one ends the process.
extern "C" void OnInterrupt(int sig) {
  g_interrupted = 1;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
}

// Installs OnInterrupt for SIGINT and SIGTERM (restores the old actions when
// destroyed).
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = OnInterrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
    // An ignored SIGINT (a background job of a script) stays ignored.
    if (old_int_.sa_handler == SIG_IGN) ::sigaction(SIGINT, &old_int_, nullptr);
  }
  ~InterruptGuard() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

bool Interrupted() { return g_interrupted != 0; }

// True when `path` can be written, without creating or changing it: an
// existing file is opened for appending; otherwise the file is created and
// removed again.
bool CanWrite(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return true;
  }
  if (errno != EEXIST) return false;
  fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string Ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

// Appends an epoch's distinct bad samples to `out` as JSON lines; false (with
// a message on stderr) when writing fails.
bool WriteBadSamples(const std::vector<BadSample>& bad, std::ofstream& out, uint64_t& lines) {
  for (const BadSample& b : bad) {
    nlohmann::ordered_json line = {
        {"epoch", b.epoch}, {"sample", b.index}, {"name", b.path}, {"reason", b.reason}};
    // Names and reasons may hold bytes that are not UTF-8: the JSON has
    // U+FFFD for them, and a name's exact bytes go in name_bytes_b64.
    if (!IsValidUtf8(b.path)) line["name_bytes_b64"] = report::Base64(b.path);
    out << line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    ++lines;
  }
  out.flush();
  if (!out) std::cerr << "sluice: error: cannot write the bad-sample list\n";
  return static_cast<bool>(out);
}

// The report's plan rows.
std::vector<std::pair<std::string, std::string>> PlanSummary(const Plan& plan,
                                                             const std::string& path,
                                                             const Loader& loader,
                                                             const LoaderStats& s) {
  std::string fields, targets;
  for (const std::string& f : plan.batch_fields()) fields += (fields.empty() ? "" : ", ") + f;
  for (const std::string& t : plan.cpu_targets()) targets += (targets.empty() ? "" : ", ") + t;
  if (!plan.cuda_target().empty()) targets += ", " + plan.cuda_target();
  return {
      {"plan", plan.name() + " (" + path + ")"},
      {"spec hash", plan.spec_hash()},
      {"compiler", plan.compiler_version()},
      {"source", plan.source_format() + ", " + std::to_string(loader.dataset_size()) + " samples"},
      {"decoder", plan.decode_op()},
      {"batch", std::to_string(loader.batch_size()) + " samples: " + fields},
      {"batches per epoch", std::to_string(loader.batches_per_epoch())},
      {"kernel targets", targets},
      {"device", s.device},
      {"knobs", "threads " + std::to_string(s.threads) + ", prefetch " +
                    std::to_string(s.prefetch) + ", pool " + std::to_string(s.pool_buffers) +
                    " x " + report::Num(static_cast<double>(s.batch_bytes) / 1e6, 1) + " MB" +
                    (s.online_tuning ? ", tuned online" : "")}};
}

// Appends an epoch's bad samples to the report's list (at most `limit` kept).
void CollectBad(const std::vector<BadSample>& bad, report::ReportData& data, size_t limit) {
  for (const BadSample& b : bad) {
    if (data.bad.size() < limit) {
      data.bad.push_back(b);
    } else {
      ++data.bad_not_listed;
    }
  }
}

// The summary's list of bad samples: each distinct sample of the run once
// (the reason it was first found bad), the first kShown of them listed.
struct SummaryBad {
  static constexpr size_t kShown = 10;
  std::vector<BadSample> shown;
  std::unordered_set<uint64_t> seen;  // dataset indexes
  void Add(const std::vector<BadSample>& bad) {
    for (const BadSample& b : bad) {
      if (seen.insert(b.index).second && shown.size() < kShown) shown.push_back(b);
    }
  }
};

// What `sluice run` was asked to do.
struct RunArgs {
  std::string plan_path, bad_samples_path, report_path;  // --trace: options.trace_path
  PlanVars vars;
  int64_t batches = -1, epochs = 1;
  LoaderOptions options;
};

// Parses `sluice run`'s arguments into `out`; 0, or the exit code of a usage
// error (already printed).
int ParseRunArgs(const Args& args, RunArgs& out) {
  LoaderOptions& o = out.options;
  // Integer flags: name, smallest and largest value, where the value goes
  // (the bounds keep every narrowing exact, and batches * epochs in range).
  constexpr int64_t kMaxCount = 1'000'000'000, kMaxInt = std::numeric_limits<int>::max();
  const std::vector<std::tuple<const char*, int64_t, int64_t, std::function<void(int64_t)>>>
      int_flags = {
          {"--batches", 1, kMaxCount, [&](int64_t n) { out.batches = n; }},
          {"--epochs", 1, kMaxCount, [&](int64_t n) { out.epochs = n; }},
          {"--threads", 1, LoaderOptions::kMaxThreads,
           [&](int64_t n) { o.threads = static_cast<int>(n); }},
          {"--prefetch", 1, LoaderOptions::kMaxPrefetch,
           [&](int64_t n) { o.prefetch = static_cast<int>(n); }},
          {"--in-flight", 1, LoaderOptions::kMaxInFlight,
           [&](int64_t n) { o.in_flight = static_cast<int>(n); }},
          {"--rank", 0, kMaxInt - 1, [&](int64_t n) { o.rank = static_cast<int>(n); }},
          {"--world-size", 1, kMaxInt, [&](int64_t n) { o.world_size = static_cast<int>(n); }},
          {"--seed", 0, std::numeric_limits<int64_t>::max(),
           [&](int64_t n) { o.seed = static_cast<uint64_t>(n); }},
      };
  // FILE flags: name, where the path goes.
  const std::vector<std::pair<const char*, std::string*>> file_flags = {
      {"--bad-samples", &out.bad_samples_path},
      {"--trace", &out.options.trace_path},  // started with the loader
      {"--report", &out.report_path}};
  std::string error, value;
  // The table flag at args[i] (advancing i): -1 when it is none of them, else
  // 0 or a usage error's exit code.
  auto take_table_flag = [&](size_t& i) -> int {
    for (const auto& [flag, min, max, set] : int_flags) {
      if (!TakeValue(args, i, flag, value, error)) continue;
      if (!error.empty()) return UsageError(error);
      int64_t n = 0;
      if (!ParseInt(value, n) || n < min || n > max) {
        return UsageError(std::string(flag) + " needs an integer from " + std::to_string(min) +
                          " to " + std::to_string(max) + ", got `" + value + "`");
      }
      set(n);
      return 0;
    }
    for (const auto& [flag, path] : file_flags) {
      if (!TakeValue(args, i, flag, value, error)) continue;
      if (!error.empty()) return UsageError(error);
      if (value.empty()) return UsageError(std::string(flag) + " needs a FILE");
      *path = value;
      return 0;
    }
    return -1;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (TakeVar(args, i, out.vars, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    if (int rc = take_table_flag(i); rc >= 0) {
      if (rc != 0) return rc;
      continue;
    }
    if (TakeValue(args, i, "--device", value, error)) {
      if (!error.empty()) return UsageError(error);
      if (value != "cpu" && value != "cuda" && !value.starts_with("cuda:")) {
        return UsageError("--device needs cpu, cuda or cuda:N, got `" + value + "`");
      }
      o.device = value;
    } else if (arg == "--dct-scaling") {
      o.dct_scaling = true;
    } else if (arg.starts_with("-")) {
      return UsageError("unknown option `" + arg + "` for run");
    } else if (!out.plan_path.empty()) {
      return UsageError("run takes one PLAN; got `" + out.plan_path + "` and `" + arg + "`");
    } else {
      out.plan_path = arg;
    }
  }
  if (out.plan_path.empty()) {
    return UsageError("run needs a PLAN directory (sluice compile -o PLAN)");
  }
  if ((o.rank >= 0) != (o.world_size >= 0)) {
    return UsageError("--rank and --world-size go together");
  }
  if (o.rank >= 0 && o.rank >= o.world_size) {
    return UsageError("--rank must be less than --world-size");
  }
  return 0;
}

// What the batch loop did.
struct RunOutcome {
  uint64_t done = 0;         // batches taken
  uint64_t epoch = 0;        // the epoch the run ended in
  uint64_t bad_lines = 0;    // lines written to --bad-samples
  double elapsed = 0;        // seconds, first Next() to the last batch
  int rc = 0;                // 0, or 1 after an error (printed)
  bool interrupted = false;  // stopped by SIGINT/SIGTERM
  uint64_t total = 0;        // batches asked for
  SummaryBad bad;            // the distinct bad samples met, for the summary
};

// Takes `total` batches as a trainer would (touching nothing but the handles),
// writing each finished epoch's bad samples to `bad_out` (when open) and to
// the report (when recording), and drawing the progress bar.
RunOutcome TakeBatches(Loader& loader, uint64_t total, std::ofstream& bad_out,
                       report::RunRecorder* recorder, report::ReportData& report_data,
                       size_t report_bad_limit) {
  RunOutcome r;
  r.total = total;
  r.epoch = loader.State().epoch;
  Progress bar("run", total, "batches");  // drawn only when stderr is a terminal
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  if (recorder) recorder->Observe(loader, true);
  // Epoch r.epoch's bad samples to the list file, the summary and (at an
  // epoch's end; the last epoch's are collected after the run) the report.
  auto take_bad = [&](bool epoch_end) {
    auto bad = loader.BadSamples(r.epoch);
    if (!bad) {  // an error only for the list file (the summary goes without)
      if (!bad_out.is_open()) return true;
      std::cerr << report::TerminalSafe(bad.error().ToString(), true) << "\n";
      return false;
    }
    r.bad.Add(*bad);
    if (recorder && epoch_end) CollectBad(*bad, report_data, report_bad_limit);
    return !bad_out.is_open() || WriteBadSamples(*bad, bad_out, r.bad_lines);
  };
  while (r.done < total) {
    if (Interrupted()) {
      r.interrupted = true;
      break;
    }
    // Waits in slices so that a signal is seen while no batch is ready.
    bool timed_out = false;
    auto next = loader.NextWithin(std::chrono::milliseconds(100), &timed_out);
    if (next && !*next && timed_out) continue;
    if (!next) {
      bar.Clear();
      // Names the bad file: its control bytes escaped (report::TerminalSafe).
      std::cerr << report::TerminalSafe(next.error().ToString(), true) << "\n";
      r.rc = 1;
      break;
    }
    if (!*next) {  // end of epoch: the next call starts the next one
      if (!take_bad(true)) {
        r.rc = 1;
        break;
      }
      ++r.epoch;
      continue;
    }
    ++r.done;
    next->reset();  // a trainer would use the batch here
    if (recorder) recorder->Observe(loader);
    if (bar.active() && seconds() > 0) {
      bar.SetNote(std::to_string(static_cast<long long>(
                      static_cast<double>(r.done * loader.batch_size()) / seconds())) +
                  " img/s");
    }
    bar.Update(r.done);
  }
  bar.Finish();
  if (!take_bad(false)) r.rc = 1;
  r.elapsed = seconds();
  if (recorder) recorder->Observe(loader, true);
  return r;
}

double ImagesPerSecond(const RunOutcome& r, const Loader& loader) {
  return r.elapsed > 0 ? static_cast<double>(r.done * loader.batch_size()) / r.elapsed : 0.0;
}

// The summary on stdout (see the file comment).
void PrintSummary(const Plan& plan, const RunArgs& a, const Loader& loader, const LoaderStats& s,
                  const RunOutcome& r, double peak_rss_mb, std::optional<uint64_t> trace_dropped) {
  using ull = unsigned long long;
  std::printf("plan:            %s (%s)\n", plan.name().c_str(), a.plan_path.c_str());
  std::printf("device:          %s\n", s.device.c_str());
  for (const std::string& w : s.warnings) std::printf("warning:         %s\n", w.c_str());
  std::printf(
      "batches:         %llu x %lld samples in %.2f s (threads %d, in flight %d, "
      "pool %d x %.1f MB)\n",
      static_cast<ull>(r.done), static_cast<long long>(loader.batch_size()), r.elapsed, s.threads,
      s.in_flight, s.pool_buffers, static_cast<double>(s.batch_bytes) / 1e6);
  std::printf("images/s:        %.1f\n", ImagesPerSecond(r, loader));
  std::printf("batch latency:   p50 %s  p99 %s  max %s\n", Ms(s.latency_p50).c_str(),
              Ms(s.latency_p99).c_str(), Ms(s.latency_max).c_str());
  std::printf("consumer waited: %.2f s (%.0f%% of the run)\n", s.consumer_wait_seconds,
              r.elapsed > 0 ? 100.0 * s.consumer_wait_seconds / r.elapsed : 0.0);
  std::printf("stage time:      read %.2f s  decode %.2f s  kernel %.2f s (summed over workers)\n",
              s.read_seconds, s.decode_seconds, s.kernel_seconds);
  std::printf("peak RSS:        %.1f MB\n", peak_rss_mb);
  if (s.remote) {
    std::printf(
        "remote:          %llu requests, %.1f MB fetched, latency p50 %s p99 %s; "
        "retries %llu, hedges %llu (%llu won), timeouts %llu, failed %llu\n",
        static_cast<ull>(s.remote_requests), static_cast<double>(s.remote_bytes_fetched) / 1e6,
        Ms(s.remote_latency_p50).c_str(), Ms(s.remote_latency_p99).c_str(),
        static_cast<ull>(s.remote_retries), static_cast<ull>(s.remote_hedges),
        static_cast<ull>(s.remote_hedge_wins), static_cast<ull>(s.remote_timeouts),
        static_cast<ull>(s.remote_failures));
    std::printf(
        "remote reads:    cache hits %llu, misses %llu, lock timeouts %llu, passed through %llu "
        "(no space %llu); coalesced %llu requests (%llu samples); shards streamed %llu, "
        "read-ahead %d (%llu stalls)\n",
        static_cast<ull>(s.cache_hits), static_cast<ull>(s.cache_misses),
        static_cast<ull>(s.cache_lock_timeouts), static_cast<ull>(s.cache_passthrough),
        static_cast<ull>(s.cache_no_space), static_cast<ull>(s.coalesced_requests),
        static_cast<ull>(s.coalesced_samples), static_cast<ull>(s.shards_streamed), s.read_ahead,
        static_cast<ull>(s.read_ahead_stalls));
  }
  std::printf("bad samples:     %llu distinct (%llu bad reads: skipped %llu, replaced %llu)\n",
              static_cast<ull>(s.bad_samples), static_cast<ull>(s.bad_reads),
              static_cast<ull>(s.skipped), static_cast<ull>(s.replaced));
  if (!a.bad_samples_path.empty()) {
    std::printf("bad-sample list: %s (%llu lines)\n", a.bad_samples_path.c_str(),
                static_cast<ull>(r.bad_lines));
  }
  // Each distinct bad sample once, escaped: a name may hold terminal escape
  // sequences or bytes that are not UTF-8.
  for (const BadSample& bad : r.bad.shown) {
    std::printf("  %s: %s\n", report::TerminalSafe(bad.path).c_str(),
                report::TerminalSafe(bad.reason).c_str());
  }
  if (r.bad.seen.size() > r.bad.shown.size()) {
    std::printf("  ... and %zu more (%s)\n", r.bad.seen.size() - r.bad.shown.size(),
                a.bad_samples_path.empty() ? "list them all with --bad-samples FILE"
                                           : "all in the bad-sample list");
  }
  if (trace_dropped) {
    std::printf("trace:           %s (%llu events dropped: a track's buffer was full)\n",
                a.options.trace_path.c_str(), static_cast<ull>(*trace_dropped));
  }
}

// Fills the rest of `data` and writes the HTML report; false (printed) when
// it cannot be written.
bool WriteRunReport(const Plan& plan, const RunArgs& a, const Loader& loader, const LoaderStats& s,
                    const RunOutcome& r, double peak_rss_mb, const report::RunRecorder& recorder,
                    report::ReportData& data) {
  data.title = plan.name();
  data.plan = PlanSummary(plan, a.plan_path, loader, s);
  data.machine = report::MachineSummary();
  data.series = recorder.points();
  data.latencies = loader.BatchLatencies();
  data.final_stats = s;
  data.elapsed = r.elapsed;
  data.warnings = s.warnings;
  data.result = {
      {"batches", std::to_string(r.done) + " x " + std::to_string(loader.batch_size()) +
                      " samples in " + report::Num(r.elapsed) + " s"},
      {"images/s", report::Num(ImagesPerSecond(r, loader), 1)},
      {"batch latency",
       "p50 " + Ms(s.latency_p50) + ", p99 " + Ms(s.latency_p99) + ", max " + Ms(s.latency_max)},
      {"consumer waited", report::Num(s.consumer_wait_seconds) + " s"},
      {"peak RSS", report::Num(peak_rss_mb, 1) + " MB"},
      {"result", r.rc != 0       ? "stopped by an error (see stderr)"
                 : r.interrupted ? "interrupted (SIGINT/SIGTERM) after " + std::to_string(r.done) +
                                       " of " + std::to_string(r.total) + " batches"
                                 : "completed"}};
  std::string error;
  if (!report::WriteReport(a.report_path, data, error)) {
    std::cerr << "sluice: error: " << error << "\n";
    return false;
  }
  std::printf("report:          %s\n", a.report_path.c_str());
  return true;
}

}  // namespace

int Run(const Args& args) {
  RunArgs a;
  if (int rc = ParseRunArgs(args, a)) return rc;
  auto plan = Plan::Load(a.plan_path, a.vars);
  if (!plan) {
    std::cerr << plan.error().ToString() << "\n";
    return 1;
  }
  auto loader = Loader::Create(*plan, a.options);
  if (!loader) {
    std::cerr << loader.error().ToString() << "\n";
    return 1;
  }
  const uint64_t per_epoch = loader->batches_per_epoch();
  const uint64_t total = a.batches > 0 ? static_cast<uint64_t>(a.batches)
                                       : per_epoch * static_cast<uint64_t>(a.epochs);
  if (per_epoch == 0 || total == 0) {  // --batches N over empty epochs would spin forever
    std::cerr << "sluice: error: the plan yields no batches (" << loader->dataset_size()
              << " samples, batch size " << loader->batch_size() << ")\n";
    return 1;
  }
  std::ofstream bad_out;
  if (!a.bad_samples_path.empty()) {
    bad_out.open(a.bad_samples_path, std::ios::trunc);
    if (!bad_out) {
      std::cerr << "sluice: error: cannot open --bad-samples file `" << a.bad_samples_path << "`\n";
      return 1;
    }
  }
  InterruptGuard interrupt_guard;  // from here a signal stops the run, see above
  std::optional<report::RunRecorder> recorder;
  report::ReportData report_data;
  constexpr size_t kReportBadLimit = 200;
  if (!a.report_path.empty()) {
    // Fail before the run, not after it, when the report cannot be written.
    if (!CanWrite(a.report_path)) {
      std::cerr << "sluice: error: cannot open report file `" << a.report_path << "`\n";
      return 1;
    }
    recorder.emplace(0.1);
  }
  RunOutcome r = TakeBatches(*loader, total, bad_out, recorder ? &*recorder : nullptr, report_data,
                             kReportBadLimit);
  if (r.interrupted) {
    std::cerr << "sluice: interrupted after " << r.done << " of " << total
              << " batches; finishing (interrupt again to quit now)\n";
  }
  std::optional<uint64_t> trace_dropped;
  if (!a.options.trace_path.empty()) {
    auto stopped = loader->StopTrace();
    if (!stopped) {
      std::cerr << stopped.error().ToString() << "\n";
      r.rc = 1;
    } else {
      trace_dropped = *stopped;
    }
  }
  const LoaderStats s = loader->Stats();
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  const double peak_rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  PrintSummary(*plan, a, *loader, s, r, peak_rss_mb, trace_dropped);
  if (recorder) {
    if (auto bad = loader->BadSamples(r.epoch)) CollectBad(*bad, report_data, kReportBadLimit);
    if (!WriteRunReport(*plan, a, *loader, s, r, peak_rss_mb, *recorder, report_data)) r.rc = 1;
  }
  if (r.rc == 0 && r.interrupted) return 130;  // 128 + SIGINT, as shells report it
  return r.rc;
}

}  // namespace sluice::cli
