// Measuring a machine for a hardware profile (`sluice profile`).
//
// Every measurement is short (the whole profile takes well under a minute by
// default), single-threaded unless it says otherwise, and robust to noise: a
// rate is the median of several timed repetitions after a warm-up. The
// runtime library holds the measurements; the caller (cli/profile_command.cc,
// the Python module) compiles the two small kernel plans the kernel
// measurement needs, so that the runtime stays free of compiler dependencies.
//
// Thread safety: the functions are independent and may run in any thread, but
// they time the calling thread, so run them one at a time on a quiet machine.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "common/usable_cores.h"
#include "sluice/result.h"

namespace sluice::runtime {

// /proc/cpuinfo's "model name" (empty when unknown).
std::string CpuModelName();
// The best kernel target this CPU runs: "avx512", "avx2" or "sse41".
std::string BestSimdLevel();

// A deterministic, photo-like RGB JPEG (gradients, soft shapes, texture,
// noise; 4:2:0, quality 90) of width x height, made with turbojpeg's
// compressor; the same bytes for the same arguments.
std::vector<uint8_t> MakeSampleJpeg(int width, int height, uint64_t seed = 0);

// libjpeg-turbo full decode of built-in samples at two sizes (250x188 and
// 500x375, ImageNet-like), fitted as t = decode_fixed_s + pixels / rate.
struct DecodeCost {
  double mpix_per_s = 0;
  double fixed_s = 0;
  double seconds_per_image_500x375 = 0;  // measured directly, for reference
};
Result<DecodeCost> MeasureDecode(double seconds);

// One-core memcpy bandwidth in GB/s (1e9 bytes copied per second) over a
// buffer of max(4 x LLC, 256 MiB). Errors: kInternal when it cannot allocate.
Result<double> MeasureMemoryBandwidth(double seconds);

// Reads of up to `max_files` regular files under `path` (sorted order, first
// ones): read_mbps = bytes / time of sequential whole-file reads; latency_s =
// median time of open + pread of the first 4 KiB; the JPEGs among them give
// mean_file_bytes / mean_width / mean_height (header parse only). The page
// cache is left as it is: a dataset that was just read measures warm.
// Errors: kNotFound (no such path or no files under it), kIo.
Result<HardwareProfile::Storage> MeasureStorage(const std::string& path, int max_files,
                                                double seconds);

// Median seconds per sample of plan `plan_path`'s first CPU kernel on `jpeg`
// (decoded once; the kernel's per-sample random arguments vary by sample
// index). Errors: Plan::Load's, kInvalidArgument (no fused chain).
Result<double> MeasureKernelSeconds(const std::string& plan_path,
                                    const std::vector<uint8_t>& jpeg, double seconds,
                                    int64_t* output_elements = nullptr,
                                    int64_t* output_pixels = nullptr);

struct MachineProfileOptions {
  std::string machine;     // free text for the profile; empty = "<cores>-core <model>"
  std::string data;        // storage path to measure; empty = none
  int max_files = 256;     // storage: files read at most
  double seconds = 20;     // rough total budget, split over the measurements
  // Plans for the kernel costs (compiled by the caller from the same 224x224
  // random_resized_crop + flip chain): `resample_plan` writes uint8 HWC,
  // `pointwise_plan` adds normalize, CHW and float16. Empty = not measured
  // (both rates then stay 0, which LoadHardwareProfile rejects: callers that
  // save the profile must provide them).
  std::string resample_plan, pointwise_plan;
  std::function<void(const std::string&)> progress;  // one line per step
};

// Everything but the gpu section (see cli/profile_command.cc).
Result<HardwareProfile> ProfileMachine(const MachineProfileOptions& options);

}  // namespace sluice::runtime
