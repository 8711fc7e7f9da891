// `sluice tune PLAN --profile HW.yaml [--var NAME=VALUE]... [--cpu-budget N]
//  [--memory-budget BYTES] [--seconds S]`: hill-climbs the loader knobs on the
// plan's real data (runtime/tune/autotuner.h), prints the convergence table and
// writes the best knobs into PLAN/plan.json's "tuned" object.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/cli.h"
#include "common/hardware_profile.h"
#include "common/progress.h"
#include "runtime/tune/autotuner.h"
#include "sluice/plan.h"

namespace sluice::cli {
namespace {

// "8G", "512M", "100k" or plain bytes; -1 on a malformed value.
int64_t ParseBytes(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v > 0)) return -1;
  std::string unit(end);
  double scale = 1;
  if (unit == "k" || unit == "K" || unit == "KiB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    return -1;
  return static_cast<int64_t>(v * scale);
}

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

int Tune(const Args& args) {
  std::string plan_path, profile_path, cpu_text, mem_text, seconds_text, value, error;
  PlanVars vars;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << UsageText();
      return 0;
    }
    if (TakeVar(args, i, vars, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    if (TakeValue(args, i, "--profile", profile_path, error) ||
        TakeValue(args, i, "--cpu-budget", cpu_text, error) ||
        TakeValue(args, i, "--memory-budget", mem_text, error) ||
        TakeValue(args, i, "--seconds", seconds_text, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    if (arg.starts_with("-")) return UsageError("unknown option `" + arg + "` for tune");
    if (!plan_path.empty()) return UsageError("tune takes one PLAN");
    plan_path = arg;
  }
  if (plan_path.empty()) return UsageError("tune needs a PLAN directory");
  if (profile_path.empty()) {
    return UsageError(
        "tune needs --profile HW.yaml (measure one with `sluice profile -o hw.yaml`)");
  }
  runtime::TuneOptions options;
  if (!cpu_text.empty()) {
    int64_t budget = 0;
    if (!ParseInt(cpu_text, budget) || budget < 1 || budget > HardwareProfile::kMaxCores) {
      return UsageError("--cpu-budget must be an integer in 1.." +
                        std::to_string(HardwareProfile::kMaxCores) + ", got `" + cpu_text + "`");
    }
    options.cpu_budget = static_cast<int>(budget);
  }
  if (!mem_text.empty()) {
    options.memory_budget = ParseBytes(mem_text);
    if (options.memory_budget <= 0) {
      return UsageError("--memory-budget must be bytes, optionally with K, M or G, got `" +
                        mem_text + "`");
    }
  }
  if (!seconds_text.empty()) {
    char* end = nullptr;
    options.seconds = std::strtod(seconds_text.c_str(), &end);
    if (end == seconds_text.c_str() || *end != '\0' || !(options.seconds >= 2) ||
        options.seconds > 3600) {
      return UsageError("--seconds must be a number in [2, 3600], got `" + seconds_text + "`");
    }
  }

  auto profile = LoadHardwareProfile(profile_path);
  if (!profile) {
    std::cerr << profile.error().ToString() << "\n";
    return 1;
  }
  auto plan = Plan::Load(plan_path, vars);
  if (!plan) {
    std::cerr << plan.error().ToString() << "\n";
    return 1;
  }
  std::printf("tuning %s on %s (profile: %s)\n", plan_path.c_str(), profile->machine.c_str(),
              profile_path.c_str());
  std::printf("%5s  %7s  %9s  %8s  %10s  %7s  %9s  %s\n", "trial", "threads", "in_flight",
              "prefetch", "images/s", "spread", "cpu cores", "memory");
  std::fflush(stdout);
  // On a terminal: the elapsed time against the budget, below the table.
  Progress bar("tune", static_cast<uint64_t>(options.seconds + 0.5), "s");
  bar.StartTicker();
  options.on_trial = [&bar](const runtime::Trial& t) {
    bar.Clear();
    bar.SetNote("trials done: " + std::to_string(t.index));
    std::printf("%5d  %7d  %9d  %8d  %10.1f  %6.1f%%  %9.2f  %s  %s\n", t.index, t.knobs.threads,
                t.knobs.in_flight, t.knobs.prefetch, t.images_per_second, 100 * t.spread,
                t.cpu_cores, Mib(t.memory_bytes).c_str(), t.note.c_str());
    std::fflush(stdout);
  };
  auto result = runtime::Autotune(*plan, *profile, options);
  bar.Finish();
  if (!result) {
    std::cerr << result.error().ToString() << "\n";
    return 1;
  }
  std::printf(
      "best: %s  %.1f images/s (cpu budget %d%s)\n", result->best.ToString().c_str(),
      result->images_per_second, result->cpu_budget,
      options.memory_budget > 0 ? (", memory budget " + Mib(options.memory_budget)).c_str() : "");
  Status written = runtime::WriteTunedKnobs(plan_path, *result, profile->machine);
  if (!written) {
    std::cerr << written.error().ToString() << "\n";
    return 1;
  }
  std::printf("wrote the tuned knobs into %s/plan.json\n", plan_path.c_str());
  return 0;
}

}  // namespace sluice::cli
