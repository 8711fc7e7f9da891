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

}  // namespace

int main(int argc, char** argv) {
  std::string plan_path, data_dir;
  const auto started = std::chrono::steady_clock::now();
  int threads = -1, batches = 8, warmup = 1;
  std::string name;
  sluice::LoaderOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](int& out) { return i + 1 < argc && ParseInt(argv[++i], out); };
    if (arg == "--threads") {
      if (!value(threads) || threads < 1) return Usage();
    } else if (arg == "--batches") {
      if (!value(batches) || batches < 1) return Usage();
    } else if (arg == "--warmup") {
      if (!value(warmup)) return Usage();
    } else if (arg == "--dct-scaling") {
      options.dct_scaling = true;
    } else if (arg == "--device") {
      if (i + 1 >= argc) return Usage();
      options.device = argv[++i];
    } else if (arg == "--name") {
      if (i + 1 >= argc) return Usage();
      name = argv[++i];
    } else if (arg == "--no-wait") {
      options.wait_for_device = false;
    } else if (arg.starts_with("-")) {
      return Usage();
    } else if (plan_path.empty()) {
      plan_path = arg;
    } else if (data_dir.empty()) {
      data_dir = arg;
    } else {
      return Usage();
    }
  }
  if (plan_path.empty() || data_dir.empty()) return Usage();
  options.threads = threads;

  auto plan = sluice::Plan::Load(plan_path, {{"DATA", data_dir}});
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.error().ToString().c_str());
    return 1;
  }
  auto loader = sluice::Loader::Create(*plan, options);
  if (!loader) {
    std::fprintf(stderr, "%s\n", loader.error().ToString().c_str());
    return 1;
  }
  if (loader->batches_per_epoch() == 0) {
    std::fprintf(stderr, "sluice_e2e_loader: no batches (%zu samples, batch size %lld)\n",
                 loader->dataset_size(), static_cast<long long>(loader->batch_size()));
    return 1;
  }

  // Takes one batch, skipping end-of-epoch markers; false on error.
  auto take = [&]() -> bool {
    while (true) {
      auto next = loader->Next();
      if (!next) {
        std::fprintf(stderr, "%s\n", next.error().ToString().c_str());
        return false;
      }
      if (*next) return true;  // released at the end of this scope
    }
  };
  auto peak_rss_mb = [] {
    struct rusage usage {};
    ::getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_maxrss) / 1024.0;
  };
  if (!take()) return 1;  // the first batch is always a warm-up batch (W >= 1)
  const double first_batch_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double first_batch_rss_mb = peak_rss_mb();
  for (int i = 1; i < warmup; ++i) {
    if (!take()) return 1;
  }
  auto cpu_seconds = [] {  // user + system time of the whole process so far
    struct rusage usage {};
    ::getrusage(RUSAGE_SELF, &usage);
    return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
           1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  };
  const double cpu_start = cpu_seconds();
  std::vector<double> waits(static_cast<size_t>(batches));  // seconds per timed batch taken
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < batches; ++i) {
    const auto asked = std::chrono::steady_clock::now();
    if (!take()) return 1;
    waits[static_cast<size_t>(i)] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu_used = cpu_seconds() - cpu_start;
  const sluice::LoaderStats stats = loader->Stats();
  const double images = static_cast<double>(batches) * static_cast<double>(loader->batch_size());
  std::printf(
      "sluice: %zu samples, %d warm-up + %d timed batches of %lld, threads %d, "
      "in flight %d, pool %d x %.1f MB\n",
      loader->dataset_size(), warmup, batches, static_cast<long long>(loader->batch_size()),
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
  if (name.empty()) name = options.dct_scaling ? "sluice_dct" : "sluice";
  std::printf(
      "RESULT %s images_per_s=%.1f peak_rss_mb=%.1f threads=%d batch=%lld "
      "batches=%d device=%s first_batch_s=%.3f first_batch_rss_mb=%.1f cpu_s=%.3f "
      "take_p50_ms=%.2f take_p99_ms=%.2f batch_p50_ms=%.2f batch_p99_ms=%.2f\n",
      name.c_str(), images / seconds, peak_rss_mb(), stats.threads,
      static_cast<long long>(loader->batch_size()), batches, stats.device.c_str(), first_batch_s,
      first_batch_rss_mb, cpu_used, 1e3 * Percentile(waits, 0.50), 1e3 * Percentile(waits, 0.99),
      1e3 * stats.latency_p50, 1e3 * stats.latency_p99);
  return 0;
}
