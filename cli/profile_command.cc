// `sluice profile -o hw.yaml [--data PATH] [--machine TEXT] [--seconds S] [--max-files N]`:
// measures this machine into a hardware profile (common/hardware_profile.h).
//
// The measurements live in the runtime (runtime/profile/machine_profiler.h);
// this file adds what needs the compiler: the two small kernel plans whose
// fused kernels give the per-pixel resample and pointwise costs, compiled for
// this CPU only into a temporary directory that is removed afterwards. The gpu
// section comes from runtime::MeasureGpu(0) (runtime/device/gpu_probe.h); without
// a CUDA driver or device it is absent and the command says "no GPU measured".
#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <string>

#include "cli/cli.h"
#include "common/hardware_profile.h"
#include "common/log.h"
#include "common/progress.h"
#include "compiler/driver/profile_probes.h"
#include "runtime/device/gpu_probe.h"
#include "runtime/profile/machine_profiler.h"

namespace sluice::cli {

int Profile(const Args& args) {
  std::string out, data, machine, seconds_text, files_text, error;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << UsageText();
      return 0;
    }
    if (TakeValue(args, i, "-o", out, error) || TakeValue(args, i, "--output", out, error) ||
        TakeValue(args, i, "--data", data, error) ||
        TakeValue(args, i, "--machine", machine, error) ||
        TakeValue(args, i, "--seconds", seconds_text, error) ||
        TakeValue(args, i, "--max-files", files_text, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    return UsageError("unexpected argument `" + args[i] + "` for profile");
  }
  if (out.empty()) return UsageError("profile needs -o FILE (use -o - for stdout)");
  runtime::MachineProfileOptions options;
  options.data = data;
  options.machine = machine;
  if (!seconds_text.empty()) {
    char* end = nullptr;
    options.seconds = std::strtod(seconds_text.c_str(), &end);
    if (end == seconds_text.c_str() || *end != '\0' || !(options.seconds > 0) ||
        options.seconds > 600) {
      return UsageError("--seconds must be a number in (0, 600], got `" + seconds_text + "`");
    }
  }
  if (!files_text.empty()) {
    options.max_files = std::atoi(files_text.c_str());
    if (options.max_files < 1 || std::to_string(options.max_files) != files_text) {
      return UsageError("--max-files must be a positive integer, got `" + files_text + "`");
    }
  }
  // On a terminal: a bar with the step being measured; otherwise the steps
  // are debug log lines (SLUICE_LOG=debug).
  Progress bar("profile", static_cast<uint64_t>(options.seconds + 0.5), "s");
  options.progress = [&bar](const std::string& line) {
    bar.SetNote(line);
    log::Debug("profile", line);
  };

  log::Info("profile", "compiling the kernel probes for this CPU");
  auto plans = CompileProfilePlans(runtime::BestSimdLevel());
  if (!plans) {
    std::cerr << plans.error().ToString() << "\n";
    return 1;
  }
  options.resample_plan = (*plans)->resample_plan;
  options.pointwise_plan = (*plans)->pointwise_plan;
  log::Info("profile",
            "measuring (about " + std::to_string(static_cast<int>(options.seconds)) + " s)");
  bar.StartTicker();
  auto profile = runtime::ProfileMachine(options);
  bar.Finish();
  if (!profile) {
    std::cerr << profile.error().ToString() << "\n";
    return 1;
  }
  auto gpu = runtime::MeasureGpu(0);
  if (gpu) {
    profile->gpu = *gpu;
    std::cerr << "  gpu: " << gpu->name << ": H2D " << gpu->h2d_pinned_gbps << " GB/s pinned, "
              << gpu->h2d_pageable_gbps << " GB/s pageable, pointwise "
              << gpu->pointwise_gelem_per_s << " Gelem/s, launch " << gpu->launch_s * 1e6
              << " us\n";
  } else {
    std::cerr << "  gpu: no GPU measured (" << gpu.error().message
              << "); the profile has no gpu section\n";
  }
  if (out == "-") {
    std::cout << HardwareProfileToYaml(*profile);
    return 0;
  }
  Status saved = SaveHardwareProfile(*profile, out);
  if (!saved) {
    std::cerr << saved.error().ToString() << "\n";
    return 1;
  }
  std::cerr << "wrote " << out << "\n";
  return 0;
}

}  // namespace sluice::cli
