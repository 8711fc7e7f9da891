// The loader's GPU stage (docs/gpu.md; only when the plan has GPU stages and a
// CUDA device is usable, LoaderConfig::gpu.use).
//
// Batch buffers are page-locked (cuMemHostAlloc), one per pool buffer; a
// chain with a GPU stage writes its uint8 staging image through the CPU-part
// kernel into the buffer (the per-sample worker does that). The worker that
// completes a batch calls Launch, which enqueues, on the stage's own stream,
// the host-to-device copy of the staging blocks and one batch kernel per GPU
// field into a fixed device arena (one block per pool buffer), then records
// the buffer's event (the scheduler's state kTransferring -> kReady). Next()
// waits on the event (or not: LoaderOptions::wait_for_device). Before a buffer
// is refilled the scheduler waits on its event (WaitBuffer), so a pending copy
// never reads a slot being rewritten. No device or host allocation per batch.
//
// kernels.so's CUDA context/stream (sluice_cuda_set_context) is process-wide:
// setting it and launching are one step under a process-wide lock, so loaders
// sharing a kernels.so each launch on their own stream.
//
// Thread safety: Launch and WaitBuffer of distinct buffers may run
// concurrently (the scheduler never launches a buffer twice at once); the
// accessors are immutable after Create. The destructor waits for the stream.
#pragma once

#include <memory>
#include <vector>

#include "ops/fusion/kernel_abi.h"
#include "runtime/device/cuda_driver.h"
#include "runtime/exec/loader_config.h"
#include "sluice/result.h"

namespace sluice::runtime {

class KernelLibrary;

class GpuStage {
 public:
  // Sets up the stage on `device` for the GPU fields of `config`: looks up
  // the CUDA runtime shim and the batch kernels in `kernels`, creates the
  // stream, the device arena (config.gpu.device_bytes per pool buffer) and,
  // per pool buffer, config.buffer_bytes of pinned host memory and an event.
  // Errors: kCorruptData (a missing kernel or shim; the message names the
  // plan), the driver's errors.
  static Result<std::unique_ptr<GpuStage>> Create(std::shared_ptr<cuda::CudaDevice> device,
                                                  const LoaderConfig& config,
                                                  const KernelLibrary& kernels);
  ~GpuStage();
  GpuStage(const GpuStage&) = delete;
  GpuStage& operator=(const GpuStage&) = delete;

  // Pool buffer `buffer`'s host memory (pinned, config.buffer_bytes).
  uint8_t* host(int buffer) const { return pinned_[static_cast<size_t>(buffer)]->data(); }
  // Field `f`'s [B, ...] output on the device for pool buffer `buffer`.
  void* device_output(int buffer, const FieldLayout& f) const;
  int device_ordinal() const { return device_->ordinal(); }
  // The buffer's event (a CUevent), recorded by Launch.
  void* event(int buffer) const { return events_[static_cast<size_t>(buffer)]->get(); }
  // Whether Next() waits for the device work (LoaderOptions::wait_for_device).
  bool wait() const { return wait_; }

  // Enqueues the buffer's copies and batch kernels and records its event.
  Status Launch(int buffer) const;
  // Waits until the work last recorded on the buffer's event is done.
  Status WaitBuffer(int buffer) const;

 private:
  GpuStage(std::shared_ptr<cuda::CudaDevice> device, const LoaderConfig& config);
  // Looks up the shim and each GPU field's batch kernel.
  Status FindKernels(const KernelLibrary& kernels);
  Status Allocate();
  // The batch kernel of field `f` on the buffer's device block.
  Status LaunchKernel(const FieldLayout& f, size_t field, cuda::CUdeviceptr block) const;

  // Destroyed in reverse: events, pinned buffers, arena and stream before the
  // device.
  std::shared_ptr<cuda::CudaDevice> device_;
  const LoaderConfig& config_;
  std::unique_ptr<cuda::CudaStream> stream_;
  std::unique_ptr<cuda::DeviceArena> arena_;
  std::vector<std::unique_ptr<cuda::PinnedBuffer>> pinned_;  // per pool buffer
  std::vector<std::unique_ptr<cuda::CudaEvent>> events_;     // per pool buffer
  std::vector<cuda::CUdeviceptr> block_;                     // per pool buffer
  std::vector<GpuBatchKernelFn> batch_fn_;                   // per field (null: not GPU)
  SetCudaContextFn set_context_ = nullptr;
  const halide_device_interface_t* interface_ = nullptr;
  bool wait_ = true;
};

}  // namespace sluice::runtime
