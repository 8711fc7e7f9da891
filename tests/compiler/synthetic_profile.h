// Test helper: the synthetic machine the compiler tests place, cost and plan
// against, so that each test names only what it changes.
#pragma once

#include <string>
#include <utility>

#include "common/hardware_profile.h"

namespace sluice::testing_profile {

// A 2-core CPU (about 1 ms per ImageNet sample on one core) with a 10 GB/s
// memory bandwidth and no GPU.
inline HardwareProfile SyntheticCpu(std::string machine = "synthetic") {
  HardwareProfile p;
  p.machine = std::move(machine);
  p.cpu.cores = 2;
  p.cpu.decode_mpix_per_s = 100;
  p.cpu.decode_fixed_s = 50e-6;
  p.cpu.resample_ns_per_px = 5;
  p.cpu.pointwise_ns_per_elem = 0.5;
  p.cpu.memory_bandwidth_gbps = 10;
  return p;
}

// A fast GPU (24 GB/s pinned, 9 GB/s pageable H2D) on device 0.
inline HardwareProfile::Gpu SyntheticGpu(std::string name = "g", double pointwise_gelem_per_s = 300,
                                         double launch_s = 10e-6) {
  return HardwareProfile::Gpu{.name = std::move(name),
                              .device = 0,
                              .h2d_pinned_gbps = 24,
                              .h2d_pageable_gbps = 9,
                              .pointwise_gelem_per_s = pointwise_gelem_per_s,
                              .launch_s = launch_s};
}

}  // namespace sluice::testing_profile
