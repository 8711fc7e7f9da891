// GpuStage: see gpu_stage.h for the contract.
#include "runtime/exec/gpu_stage.h"

#include <mutex>

#include "runtime/kernels/kernel_library.h"

namespace sluice::runtime {
namespace {

// kernels.so's CUDA context/stream (sluice_cuda_set_context) is process-wide:
// setting it and launching are one step under this lock, so loaders sharing a
// kernels.so each launch on their own stream.
std::mutex& LaunchMutex() {
  static std::mutex m;
  return m;
}

}  // namespace

GpuStage::GpuStage(std::shared_ptr<cuda::CudaDevice> device, const LoaderConfig& config)
    : device_(std::move(device)), config_(config), wait_(config.gpu.wait) {}

GpuStage::~GpuStage() {
  // Device work may still read the pinned buffers or write the arena.
  if (stream_) (void)stream_->Synchronize();
}

Result<std::unique_ptr<GpuStage>> GpuStage::Create(std::shared_ptr<cuda::CudaDevice> device,
                                                   const LoaderConfig& config,
                                                   const KernelLibrary& kernels) {
  std::unique_ptr<GpuStage> stage(new GpuStage(std::move(device), config));
  if (Status st = stage->FindKernels(kernels); !st) {
    Error e = st.error();
    e.message = config.where + ": setting up the GPU path: " + e.message;
    return std::unexpected(std::move(e));
  }
  SLUICE_RETURN_IF_ERROR(stage->Allocate());
  // The primary context must outlive kernels.so's Halide module cache.
  kernels.KeepUntilUnloaded(stage->device_);
  return stage;
}

Status GpuStage::FindKernels(const KernelLibrary& lib) {
  set_context_ = reinterpret_cast<SetCudaContextFn>(lib.Symbol(kSetCudaContextSymbol));
  auto iface = reinterpret_cast<const halide_device_interface_t* (*)()>(
      lib.Symbol("halide_cuda_device_interface"));
  if (set_context_ == nullptr || iface == nullptr) {
    return MakeError(ErrorCode::kCorruptData,
                     "kernels.so has GPU stages but no CUDA runtime shim "
                     "(sluice_cuda_set_context / halide_cuda_device_interface)",
                     "recompile the plan with this version of sluice");
  }
  interface_ = iface();
  batch_fn_.assign(config_.fields.size(), nullptr);
  for (size_t i = 0; i < config_.fields.size(); ++i) {
    const FieldLayout& f = config_.fields[i];
    if (!f.gpu) continue;
    batch_fn_[i] = reinterpret_cast<GpuBatchKernelFn>(lib.Symbol(f.gpu_batch_symbol));
    if (batch_fn_[i] == nullptr || f.kernel == nullptr) {
      return MakeError(ErrorCode::kCorruptData,
                       "kernel `" + f.gpu_batch_symbol + "` or its CPU part is missing",
                       "recompile the plan");
    }
  }
  auto stream = cuda::CudaStream::Create(device_);
  if (!stream) return std::unexpected(stream.error());
  stream_ = std::move(*stream);
  return Ok();
}

Status GpuStage::Allocate() {
  const size_t pool = static_cast<size_t>(config_.pool_buffers());
  auto arena = cuda::DeviceArena::Create(device_, config_.gpu.device_bytes * pool);
  if (!arena) return std::unexpected(arena.error());
  arena_ = std::move(*arena);
  for (size_t i = 0; i < pool; ++i) {
    auto pinned = cuda::PinnedBuffer::Allocate(device_, config_.buffer_bytes);
    if (!pinned) return std::unexpected(pinned.error());
    auto event = cuda::CudaEvent::Create(device_);
    if (!event) return std::unexpected(event.error());
    auto block = arena_->Take(config_.gpu.device_bytes);
    if (!block) return std::unexpected(block.error());
    pinned_.push_back(std::move(*pinned));
    events_.push_back(std::move(*event));
    block_.push_back(*block);
  }
  return Ok();
}

void* GpuStage::device_output(int buffer, const FieldLayout& f) const {
  return reinterpret_cast<void*>(
      static_cast<uintptr_t>(block_[static_cast<size_t>(buffer)] + f.device_output));
}

Status GpuStage::WaitBuffer(int buffer) const {
  return events_[static_cast<size_t>(buffer)]->Synchronize();
}

Status GpuStage::Launch(int buffer) const {
  const cuda::CudaDriver& drv = device_->driver();
  cuda::CudaDevice::Scope scope(*device_);
  SLUICE_RETURN_IF_ERROR(scope.status());
  const cuda::CUdeviceptr block = block_[static_cast<size_t>(buffer)];
  const size_t b = static_cast<size_t>(config_.batch_size);
  const uint8_t* host = pinned_[static_cast<size_t>(buffer)]->data();
  for (const FieldLayout& f : config_.fields) {
    if (!f.gpu) continue;
    SLUICE_RETURN_IF_ERROR(
        drv.Check(drv.cuMemcpyHtoDAsync(block + f.device_staging, host + f.offset,
                                        f.host_sample_bytes * b, stream_->get()),
                  "host-to-device copy of field `" + f.name + "`"));
  }
  {
    std::lock_guard launch(LaunchMutex());
    set_context_(device_->context(), stream_->get());
    for (size_t i = 0; i < config_.fields.size(); ++i) {
      if (!config_.fields[i].gpu) continue;
      SLUICE_RETURN_IF_ERROR(LaunchKernel(config_.fields[i], i, block));
    }
  }
  return events_[static_cast<size_t>(buffer)]->Record(stream_->get());
}

Status GpuStage::LaunchKernel(const FieldLayout& f, size_t field, cuda::CUdeviceptr block) const {
  const TensorType& st = f.staging;
  const int32_t sh = static_cast<int32_t>(st.dims[st.height_axis()]);
  const int32_t sw = static_cast<int32_t>(st.dims[st.width_axis()]);
  const int32_t sc = static_cast<int32_t>(st.dims[st.channel_axis()]);
  const int32_t n = static_cast<int32_t>(config_.batch_size);
  // Planar staging (ops/fusion/gpu_staging.h), dims (c, x, y, n).
  halide_dimension_t in_dims[4] = {
      {0, sc, sw * sh, 0}, {0, sw, 1, 0}, {0, sh, sw, 0}, {0, n, sc * sw * sh, 0}};
  halide_buffer_t in{};
  in.device = block + f.device_staging;
  in.device_interface = interface_;
  in.type = halide_type_t(halide_type_uint, 8);
  in.dimensions = 4;
  in.dim = in_dims;
  const TensorType& ot = f.steps->output;
  halide_dimension_t out_dims[4];
  SampleOutputDims(ot, out_dims);  // the batch dim follows a dense sample
  out_dims[3] = {0, n, out_dims[0].extent * out_dims[1].extent * out_dims[2].extent, 0};
  halide_buffer_t out{};
  out.device = block + f.device_output;
  out.device_interface = interface_;
  out.type = HalideElementType(ot.dtype);
  out.dimensions = 4;
  out.dim = out_dims;
  ClearHalideError();  // so that a failure reports this call's Halide message
  const int rc = batch_fn_[field](&in, &out);
  if (rc != 0) {
    return MakeError(ErrorCode::kInternal,
                     HalideFailure("GPU batch kernel of field `" + f.name + "`", rc));
  }
  return Ok();
}

}  // namespace sluice::runtime
