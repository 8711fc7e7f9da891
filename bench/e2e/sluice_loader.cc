// sluice_e2e_loader: Sluice's side of the end-to-end benchmark.
//
//   sluice_e2e_loader PLAN DATA_DIR [--threads T] [--batches N] [--warmup W]
//                     [--dct-scaling] [--device cpu|cuda|cuda:N] [--no-wait] [--name NAME]
//
// Loads PLAN (a `sluice compile` output directory) binding ${DATA}=DATA_DIR,
// creates a Loader with `threads` = T, takes W warm-up batches (not timed:
// they include filling the pipeline), then times N more batches as a trainer
// would take them (the batch handle is released at once; epochs roll over
// transparently). Links only the runtime (no compiler, Halide or LLVM), so its
// peak RSS (getrusage ru_maxrss, the whole process) is what a training process
// pays for Sluice. --device sets LoaderOptions::device (default: the plan's
// output.device); on the GPU path each batch's device work has completed when
// it is taken (LoaderOptions::wait_for_device), unless --no-wait. Prints a
// machine-readable line last:
//
//   RESULT sluice images_per_s=X peak_rss_mb=Y threads=T batch=B batches=N device=D
//          first_batch_s=F first_batch_rss_mb=R cpu_s=C take_p50_ms=T50 take_p99_ms=T99
//          batch_p50_ms=B50 batch_p99_ms=B99
//
// (`RESULT sluice_dct ...` with --dct-scaling, `RESULT NAME ...` with --name;
// D is LoaderStats::device: "cpu" or "cuda:N"; F is the time from before
// Plan::Load to the first batch in hand, R the peak RSS then. Warnings, e.g.
// the no-GPU fallback, go to stderr; C is the process's user + system CPU
// seconds over the timed batches, which machine load disturbs less than the
// wall time: images / C is the work each image costs. T50/T99: the trainer's
// wait in Next() per timed batch, median and 99th percentile (nearest rank);
// B50/B99: LoaderStats' batch latency, first sample started to last written.)
// A remote source also prints, before it, `REMOTE requests=... retries=...
// hedges=... hedge_wins=... timeouts=... latency_p50_ms=... latency_p99_ms=...`
// (LoaderStats' request counters over the whole run).
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/sluice.h"

namespace {

// The q-quantile (nearest rank) of `values`; 0 when empty. Sorts `values`.
double Percentile(std::vector<double>& values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[rank == 0 ? 0 : rank - 1];
}

bool ParseInt(std::string_view text, int& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && out >= 0;
}

int Usage() {
  std::fprintf(
      stderr,
      "usage: sluice_e2e_loader PLAN DATA_DIR [--threads T] [--batches N] "
      "[--warmup W] [--dct-scaling] [--device cpu|cuda|cuda:N] [--no-wait] [--name NAME]\n");
  return 2;
}

struct Args {
  std::string plan_path, data_dir, name;
  int batches = 8, warmup = 1;
  sluice::LoaderOptions options;
};

// The command line (see the file comment); false on a usage error.
bool ParseArgs(int argc, char** argv, Args& args) {
  sluice::LoaderOptions& options = args.options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](int& out) { return i + 1 < argc && ParseInt(argv[++i], out); };
    if (arg == "--threads") {
      if (!value(options.threads) || options.threads < 1) return false;
    } else if (arg == "--batches") {
      if (!value(args.batches) || args.batches < 1) return false;
    } else if (arg == "--warmup") {
      if (!value(args.warmup)) return false;
    } else if (arg == "--dct-scaling") {
      options.dct_scaling = true;
    } else if (arg == "--device") {
      if (i + 1 >= argc) return false;
      options.device = argv[++i];
    } else if (arg == "--name") {
      if (i + 1 >= argc) return false;
      args.name = argv[++i];
    } else if (arg == "--no-wait") {
      options.wait_for_device = false;
    } else if (arg.starts_with("-")) {
      return false;
    } else if (args.plan_path.empty()) {
      args.plan_path = arg;
    } else if (args.data_dir.empty()) {
      args.data_dir = arg;
    } else {
      return false;
    }
  }
  if (args.name.empty()) args.name = options.dct_scaling ? "sluice_dct" : "sluice";
  return !args.plan_path.empty() && !args.data_dir.empty();
}

double PeakRssMb() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

double CpuSeconds() {  // user + system time of the whole process so far
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Takes one batch, skipping end-of-epoch markers; false on error.
bool Take(sluice::Loader& loader) {
  while (true) {
    auto next = loader.Next();
    if (!next) {
      std::fprintf(stderr, "%s\n", next.error().ToString().c_str());
      return false;
    }
    if (*next) return true;  // released at the end of this scope
  }
}

// What the timed batches measured (see RESULT in the file comment).
struct Timing {
  double first_batch_s = 0, first_batch_rss_mb = 0, seconds = 0, cpu_s = 0;
  std::vector<double> waits;  // the trainer's wait per timed batch, seconds
};

// The human-readable lines, the REMOTE line and the RESULT line.
void PrintReport(const Args& args, sluice::Loader& loader, Timing& t) {
  const sluice::LoaderStats stats = loader.Stats();
  const double images =
      static_cast<double>(args.batches) * static_cast<double>(loader.batch_size());
  std::printf(
      "sluice: %zu samples, %d warm-up + %d timed batches of %lld, threads %d, "
      "in flight %d, pool %d x %.1f MB\n",
      loader.dataset_size(), args.warmup, args.batches, static_cast<long long>(loader.batch_size()),
      stats.threads, stats.in_flight, stats.pool_buffers,
      static_cast<double>(stats.batch_bytes) / 1e6);
  std::printf(
      "stage time (whole run, summed over workers): read %.2f s, decode %.2f s, "
      "kernel %.2f s; consumer waited %.2f s; bad samples %llu\n",
      stats.read_seconds, stats.decode_seconds, stats.kernel_seconds, stats.consumer_wait_seconds,
      static_cast<unsigned long long>(stats.bad_samples));
  if (stats.remote) {
    std::printf(
        "REMOTE requests=%llu bytes_mb=%.1f retries=%llu hedges=%llu hedge_wins=%llu "
        "timeouts=%llu failures=%llu latency_p50_ms=%.2f latency_p99_ms=%.2f\n",
        static_cast<unsigned long long>(stats.remote_requests),
        static_cast<double>(stats.remote_bytes_fetched) / 1e6,
        static_cast<unsigned long long>(stats.remote_retries),
        static_cast<unsigned long long>(stats.remote_hedges),
        static_cast<unsigned long long>(stats.remote_hedge_wins),
        static_cast<unsigned long long>(stats.remote_timeouts),
        static_cast<unsigned long long>(stats.remote_failures), 1e3 * stats.remote_latency_p50,
        1e3 * stats.remote_latency_p99);
  }
  for (const std::string& w : stats.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::printf(
      "RESULT %s images_per_s=%.1f peak_rss_mb=%.1f threads=%d batch=%lld "
      "batches=%d device=%s first_batch_s=%.3f first_batch_rss_mb=%.1f cpu_s=%.3f "
      "take_p50_ms=%.2f take_p99_ms=%.2f batch_p50_ms=%.2f batch_p99_ms=%.2f\n",
      args.name.c_str(), images / t.seconds, PeakRssMb(), stats.threads,
      static_cast<long long>(loader.batch_size()), args.batches, stats.device.c_str(),
      t.first_batch_s, t.first_batch_rss_mb, t.cpu_s, 1e3 * Percentile(t.waits, 0.50),
      1e3 * Percentile(t.waits, 0.99), 1e3 * stats.latency_p50, 1e3 * stats.latency_p99);
}

}  // namespace

int main(int argc, char** argv) {
  const auto started = std::chrono::steady_clock::now();
  Args args;
  if (!ParseArgs(argc, argv, args)) return Usage();
  auto plan = sluice::Plan::Load(args.plan_path, {{"DATA", args.data_dir}});
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.error().ToString().c_str());
    return 1;
  }
  auto loader = sluice::Loader::Create(*plan, args.options);
  if (!loader) {
    std::fprintf(stderr, "%s\n", loader.error().ToString().c_str());
    return 1;
  }
  if (loader->batches_per_epoch() == 0) {
    std::fprintf(stderr, "sluice_e2e_loader: no batches (%zu samples, batch size %lld)\n",
                 loader->dataset_size(), static_cast<long long>(loader->batch_size()));
    return 1;
  }
  Timing t;
  if (!Take(*loader)) return 1;  // the first batch is always a warm-up batch (W >= 1)
  t.first_batch_s = SecondsSince(started);
  t.first_batch_rss_mb = PeakRssMb();
  for (int i = 1; i < args.warmup; ++i) {
    if (!Take(*loader)) return 1;
  }
  const double cpu_start = CpuSeconds();
  t.waits.resize(static_cast<size_t>(args.batches));
  const auto start = std::chrono::steady_clock::now();
  for (double& wait : t.waits) {
    const auto asked = std::chrono::steady_clock::now();
    if (!Take(*loader)) return 1;
    wait = SecondsSince(asked);
  }
  t.seconds = SecondsSince(start);
  t.cpu_s = CpuSeconds() - cpu_start;
  PrintReport(args, *loader, t);
  return 0;
}
