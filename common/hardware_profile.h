// A hardware profile: what `sluice profile -o hw.yaml` measured on a machine,
// read by the cost model (compiler/cost/) and by `sluice tune`.
//
// File format: YAML (a JSON document is valid too), described by
// schemas/hardware.schema.json (HardwareProfileSchema() below). Every rate is
// per CPU core unless it says otherwise; times are seconds, sizes bytes.
//
//   format_version: 1
//   machine: "2-core Debian VM, Intel Xeon (Sapphire Rapids), no GPU"
//   measured_at: "2026-11-21T22:10:00Z"
//   sluice_version: "0.1.0"
//   cpu:
//     cores: 2                         # hardware threads usable by the loader
//     model: "Intel(R) Xeon(R) ..."
//     simd: avx2                       # best kernel target: sse41 | avx2 | avx512
//     decode_mpix_per_s: 95.0          # libjpeg-turbo full decode, megapixels/s per core
//     decode_fixed_s: 0.00005          # per-image decode overhead (headers, setup)
//     resample_ns_per_px: 2.1          # fused resample, per output pixel (all channels)
//     pointwise_ns_per_elem: 0.3       # fused pointwise tail, per output element
//     memory_bandwidth_gbps: 9.5       # one-core memcpy, GB/s (1e9 bytes)
//   storage:                           # absent when no path was given
//     path: "/data/imagenet"
//     read_mbps: 850.0                 # sequential whole-file reads, MB/s (1e6 bytes)
//     latency_s: 0.00008               # open + first byte of a small file
//     mean_file_bytes: 110000          # the dataset's JPEGs, sampled (when path is a dataset)
//     mean_width: 500                  # mean decoded width / height of those JPEGs
//     mean_height: 375
//     decode_mpix_per_s: 150.0         # those JPEGs' full decode, Mpx/s per core (fixed cost included)
//   gpu:                               # absent (or null) without a CUDA device
//     name: "NVIDIA H100 80GB HBM3"
//     device: 0
//     h2d_pinned_gbps: 24.0
//     h2d_pageable_gbps: 9.0
//     pointwise_gelem_per_s: 300.0     # batch-wide pointwise kernel, 1e9 elements/s
//     launch_s: 0.00001                # per kernel launch
//
// Thread safety: plain data and pure functions.
#pragma once

#include <optional>
#include <string>

#include "sluice/result.h"

namespace sluice {

struct HardwareProfile {
  static constexpr int kFormatVersion = 1;
  // The most cpu.cores a profile may say: LoaderOptions::kMaxThreads, the
  // largest thread count and CPU budget the loader (and `sluice tune`) takes.
  static constexpr int kMaxCores = 4096;

  std::string machine;       // free text: which machine this is
  std::string measured_at;   // ISO 8601 UTC
  std::string sluice_version;

  struct Cpu {
    int cores = 1;
    std::string model;
    std::string simd = "sse41";
    double decode_mpix_per_s = 0;
    double decode_fixed_s = 0;
    double resample_ns_per_px = 0;
    double pointwise_ns_per_elem = 0;
    double memory_bandwidth_gbps = 0;
  } cpu;

  struct Storage {
    std::string path;
    double read_mbps = 0;
    double latency_s = 0;
    // Sampled from the JPEGs under `path` (0 when it holds none): the cost
    // model's per-sample sizes. Without them it assumes ImageNet's
    // 500x375, 110 kB.
    double mean_file_bytes = 0;
    double mean_width = 0, mean_height = 0;
    // Full decode of those JPEGs, megapixels/s per core with the per-image
    // overhead folded in (0: none decoded). The cost model prefers it to
    // cpu.decode_mpix_per_s (the built-in sample), since real files differ
    // in quality, subsampling and entropy.
    double decode_mpix_per_s = 0;
  };
  std::optional<Storage> storage;

  struct Gpu {
    std::string name;
    int device = 0;
    double h2d_pinned_gbps = 0;
    double h2d_pageable_gbps = 0;
    double pointwise_gelem_per_s = 0;
    double launch_s = 0;
  };
  std::optional<Gpu> gpu;
};

// Reads a profile. Errors: kNotFound (no such file), kInvalidSpec with
// "file:line:col: ..." and a hint for malformed YAML, a missing required field,
// a wrong type, a non-positive rate, cpu.cores outside 1..kMaxCores, or another
// format_version.
Result<HardwareProfile> LoadHardwareProfile(const std::string& path);
// The same from text (`name` is used in messages in place of a path).
Result<HardwareProfile> ParseHardwareProfile(const std::string& text, const std::string& name);
// YAML text that ParseHardwareProfile reads back to an equal profile, with a
// comment line per section saying what the numbers mean.
std::string HardwareProfileToYaml(const HardwareProfile& profile);
// Writes HardwareProfileToYaml to `path`. Errors: kIo.
Status SaveHardwareProfile(const HardwareProfile& profile, const std::string& path);
// The JSON Schema (draft 2020-12) of the file, as checked in at
// schemas/hardware.schema.json.
std::string HardwareProfileSchema();

}  // namespace sluice
