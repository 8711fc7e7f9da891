// GPU measurements for a hardware profile (`sluice profile`, issue 6).
//
// MeasureGpu(device) takes about a second on a GPU and measures, through the
// driver API (runtime/device/cuda_driver.h):
//   h2d_pinned_gbps     64 MiB copies from page-locked memory (async on a
//                       stream, then synchronized), best of 5
//   h2d_pageable_gbps   the same from ordinary (pageable) memory
//   pointwise_gelem_per_s  an estimate of the batch pointwise kernel's rate
//                       (uint8 in, up to 2 bytes out per element: memory
//                       bound): device-to-device copy bandwidth / 3 bytes.
//                       It needs no compiled kernel; a plan's real batch
//                       kernel time is in LoaderStats on the GPU path.
//   launch_s            the fixed cost of one batch hand-off: a 1-byte async
//                       copy + stream synchronize, median of 20
// Errors: those of CudaDevice::Open (kUnsupported without driver or device),
// kInternal when a driver call fails. Never crashes without a GPU.
#pragma once

#include "common/hardware_profile.h"
#include "sluice/result.h"

namespace sluice::runtime {

Result<HardwareProfile::Gpu> MeasureGpu(int device);

}  // namespace sluice::runtime
