// GPU probe: see gpu_probe.h.
#include "runtime/device/gpu_probe.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/device/cuda_driver.h"

namespace sluice::runtime {

Result<HardwareProfile::Gpu> MeasureGpu(int device) {
  using Clock = std::chrono::steady_clock;
  auto dev = cuda::CudaDevice::Open(device);
  if (!dev) return std::unexpected(dev.error());
  const cuda::CudaDriver& drv = (*dev)->driver();
  constexpr size_t kBytes = size_t{64} << 20;
  auto pinned = cuda::PinnedBuffer::Allocate(*dev, kBytes);
  if (!pinned) return std::unexpected(pinned.error());
  auto arena = cuda::DeviceArena::Create(*dev, 2 * kBytes);
  if (!arena) return std::unexpected(arena.error());
  auto a = (*arena)->Take(kBytes);
  auto b = (*arena)->Take(kBytes);
  if (!a || !b) return MakeError(ErrorCode::kInternal, "device arena sizing");
  auto stream = cuda::CudaStream::Create(*dev);
  if (!stream) return std::unexpected(stream.error());
  std::vector<uint8_t> pageable(kBytes, 1);
  std::fill_n((*pinned)->data(), kBytes, uint8_t{1});

  cuda::CudaDevice::Scope scope(**dev);
  SLUICE_RETURN_IF_ERROR(scope.status());
  auto best_gbps = [&](auto&& op, const char* what) -> Result<double> {
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      auto t0 = Clock::now();
      SLUICE_RETURN_IF_ERROR(drv.Check(op(), what));
      SLUICE_RETURN_IF_ERROR(drv.Check(drv.cuStreamSynchronize((*stream)->get()), what));
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return static_cast<double>(kBytes) / best / 1e9;
  };
  HardwareProfile::Gpu g;
  g.device = device;
  g.name = (*dev)->name();
  auto pin = best_gbps(
      [&] { return drv.cuMemcpyHtoDAsync(*a, (*pinned)->data(), kBytes, (*stream)->get()); },
      "pinned host-to-device copy");
  if (!pin) return std::unexpected(pin.error());
  g.h2d_pinned_gbps = *pin;
  auto page = best_gbps([&] { return drv.cuMemcpyHtoD(*a, pageable.data(), kBytes); },
                        "pageable host-to-device copy");
  if (!page) return std::unexpected(page.error());
  g.h2d_pageable_gbps = *page;
  auto d2d = best_gbps([&] { return drv.cuMemcpyDtoD(*b, *a, kBytes); },
                       "device-to-device copy");
  if (!d2d) return std::unexpected(d2d.error());
  // A copy reads and writes each byte: 2 * bytes moved.
  g.pointwise_gelem_per_s = 2.0 * *d2d / 3.0;
  std::vector<double> lat;
  for (int i = 0; i < 20; ++i) {
    auto t0 = Clock::now();
    SLUICE_RETURN_IF_ERROR(drv.Check(
        drv.cuMemcpyHtoDAsync(*a, (*pinned)->data(), 1, (*stream)->get()), "1-byte copy"));
    SLUICE_RETURN_IF_ERROR(drv.Check(drv.cuStreamSynchronize((*stream)->get()), "synchronize"));
    lat.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::nth_element(lat.begin(), lat.begin() + lat.size() / 2, lat.end());
  g.launch_s = lat[lat.size() / 2];
  return g;
}

}  // namespace sluice::runtime
