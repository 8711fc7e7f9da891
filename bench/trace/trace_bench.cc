// sluice_trace_bench: what tracing costs (bench/RESULTS.md, "Tracing").
//
//   sluice_trace_bench PLAN DATA_DIR [--rounds R] [--batches N] [--threads T] [--trace-dir DIR]
//                      [--only off|on]
//
// R rounds; each round runs two fresh loaders over the same plan, one with
// tracing off and one with Loader::StartTrace on (the order alternates from
// round to round so drift hits both alike). Each loader is warmed with 3
// batches, then N batches are timed (Next() and dropping the batch: a trainer
// that consumes nothing, the loader's worst case for relative overhead). The
// trace is written after the timed part (StopTrace; its time is printed
// separately). Prints one line per run, then the medians of images/s with
// tracing off and on and the median of the per-round on/off ratios.
// --only off|on runs just that loader once per round (for instruction counts
// under `valgrind --tool=callgrind`, see bench/RESULTS.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct RunResult {
  double images_per_second = 0;
  double stop_seconds = 0;
  uint64_t dropped = 0;
  size_t bytes = 0;
};

bool RunOnce(const sluice::Plan& plan, int threads, int batches, const std::string& trace_path,
             RunResult& out) {
  sluice::LoaderOptions options;
  options.threads = threads;
  options.rank = 0;
  options.world_size = 1;
  auto loader = sluice::Loader::Create(plan, options);
  if (!loader) {
    std::fprintf(stderr, "%s\n", loader.error().ToString().c_str());
    return false;
  }
  auto next = [&]() -> bool {
    while (true) {
      auto b = loader->Next();
      if (!b) {
        std::fprintf(stderr, "%s\n", b.error().ToString().c_str());
        return false;
      }
      if (*b) return true;  // end of epoch: go on with the next
    }
  };
  for (int i = 0; i < 3; ++i) {
    if (!next()) return false;
  }
  if (!trace_path.empty()) {
    if (auto st = loader->StartTrace(trace_path, 1 << 18); !st) {
      std::fprintf(stderr, "%s\n", st.error().ToString().c_str());
      return false;
    }
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < batches; ++i) {
    if (!next()) return false;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  out.images_per_second = static_cast<double>(batches * loader->batch_size()) / seconds;
  if (!trace_path.empty()) {
    const auto s0 = Clock::now();
    auto dropped = loader->StopTrace();
    out.stop_seconds = std::chrono::duration<double>(Clock::now() - s0).count();
    if (!dropped) {
      std::fprintf(stderr, "%s\n", dropped.error().ToString().c_str());
      return false;
    }
    out.dropped = *dropped;
    out.bytes = std::filesystem::file_size(trace_path);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: sluice_trace_bench PLAN DATA_DIR [--rounds R] [--batches N] "
                 "[--threads T] [--trace-dir DIR]\n");
    return 2;
  }
  int rounds = 7, batches = 200, threads = 2;
  std::string only;
  std::string trace_dir = std::filesystem::temp_directory_path().string();
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else if (flag == "--batches")
      batches = std::atoi(argv[i + 1]);
    else if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--trace-dir")
      trace_dir = argv[i + 1];
    else if (flag == "--only")
      only = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  auto plan = sluice::Plan::Load(argv[1], {{"DATA", argv[2]}});
  if (!plan) {
    std::fprintf(stderr, "%s\n", plan.error().ToString().c_str());
    return 1;
  }
  const std::string trace_path =
      trace_dir + "/sluice_trace_bench_" + std::to_string(::getpid()) + ".json";
  std::vector<double> off, on, ratio;
  for (int r = 0; r < rounds; ++r) {
    RunResult a, b;
    const bool on_first = r % 2 == 1;
    for (int k = 0; k < 2; ++k) {
      const bool traced = (k == 0) == on_first;
      if (!only.empty() && traced != (only == "on")) continue;
      RunResult& res = traced ? b : a;
      if (!RunOnce(*plan, threads, batches, traced ? trace_path : "", res)) return 1;
      std::printf("round %d  trace %-3s  %8.1f images/s", r, traced ? "on" : "off",
                  res.images_per_second);
      if (traced) {
        std::printf("  (stop+write %.3f s, %.1f MB, %llu dropped)", res.stop_seconds,
                    static_cast<double>(res.bytes) / 1e6,
                    static_cast<unsigned long long>(res.dropped));
      }
      std::printf("\n");
    }
    if (!only.empty()) continue;
    off.push_back(a.images_per_second);
    on.push_back(b.images_per_second);
    ratio.push_back(b.images_per_second / a.images_per_second);
  }
  std::error_code ignored;
  std::filesystem::remove(trace_path, ignored);
  std::printf("median images/s: off %.1f  on %.1f  (median on/off ratio %.4f: %+.2f%%)\n",
              Median(off), Median(on), Median(ratio), (Median(ratio) - 1) * 100);
  return 0;
}
