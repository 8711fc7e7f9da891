// CUDA driver API through dlopen (see cuda_driver.h).
#include "runtime/device/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <type_traits>

namespace sluice::runtime::cuda {
namespace {

constexpr unsigned kHostAllocPortable = 0x01;   // CU_MEMHOSTALLOC_PORTABLE
constexpr unsigned kStreamNonBlocking = 0x01;   // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 0x02;  // CU_EVENT_DISABLE_TIMING

const char* kHint =
    "a CUDA device and its driver (libcuda.so.1) are needed for the GPU path; without them "
    "run on the CPU (output.device: cpu, or LoaderOptions::device = \"cpu\")";

Result<const CudaDriver*> Load() {
  auto* d = new CudaDriver;  // lives for the process (function pointers into libcuda)
  d->library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (d->library == nullptr) {
    const char* err = dlerror();
    delete d;
    return MakeError(ErrorCode::kUnsupported,
                     std::string("no CUDA driver: libcuda.so.1 not loadable: ") + (err ? err : "?"),
                     kHint);
  }
  std::string missing;
  auto sym = [&](auto& fn, const char* name, bool v2) {
    void* p = nullptr;
    if (v2) p = dlsym(d->library, (std::string(name) + "_v2").c_str());
    if (p == nullptr) p = dlsym(d->library, name);
    if (p == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  sym(d->cuInit, "cuInit", false);
  sym(d->cuDriverGetVersion, "cuDriverGetVersion", false);
  sym(d->cuDeviceGetCount, "cuDeviceGetCount", false);
  sym(d->cuDeviceGet, "cuDeviceGet", false);
  sym(d->cuDeviceGetName, "cuDeviceGetName", false);
  sym(d->cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", false);
  sym(d->cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", true);
  sym(d->cuCtxPushCurrent, "cuCtxPushCurrent", true);
  sym(d->cuCtxPopCurrent, "cuCtxPopCurrent", true);
  sym(d->cuMemHostAlloc, "cuMemHostAlloc", false);
  sym(d->cuMemFreeHost, "cuMemFreeHost", false);
  sym(d->cuMemAlloc, "cuMemAlloc", true);
  sym(d->cuMemFree, "cuMemFree", true);
  sym(d->cuMemGetInfo, "cuMemGetInfo", true);
  sym(d->cuMemcpyHtoD, "cuMemcpyHtoD", true);
  sym(d->cuMemcpyDtoH, "cuMemcpyDtoH", true);
  sym(d->cuMemcpyDtoD, "cuMemcpyDtoD", true);
  sym(d->cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync", true);
  sym(d->cuStreamCreate, "cuStreamCreate", false);
  sym(d->cuStreamDestroy, "cuStreamDestroy", true);
  sym(d->cuStreamSynchronize, "cuStreamSynchronize", false);
  sym(d->cuStreamWaitEvent, "cuStreamWaitEvent", false);
  sym(d->cuEventCreate, "cuEventCreate", false);
  sym(d->cuEventDestroy, "cuEventDestroy", true);
  sym(d->cuEventRecord, "cuEventRecord", false);
  sym(d->cuEventSynchronize, "cuEventSynchronize", false);
  sym(d->cuEventQuery, "cuEventQuery", false);
  sym(d->cuEventElapsedTime, "cuEventElapsedTime", false);
  sym(d->cuGetErrorName, "cuGetErrorName", false);
  sym(d->cuGetErrorString, "cuGetErrorString", false);
  if (!missing.empty()) {
    dlclose(d->library);
    delete d;
    return MakeError(ErrorCode::kUnsupported,
                     "the CUDA driver (libcuda.so.1) lacks " + missing + " (too old?)", kHint);
  }
  if (Status st = d->Check(d->cuInit(0), "cuInit"); !st) {
    Error e = st.error();
    e.code = ErrorCode::kUnsupported;
    e.hint = kHint;
    dlclose(d->library);
    delete d;
    return std::unexpected(std::move(e));
  }
  return d;
}

}  // namespace

Result<const CudaDriver*> CudaDriver::Get() {
  static const Result<const CudaDriver*> driver = Load();
  return driver;
}

Status CudaDriver::Check(CUresult rc, const std::string& what) const {
  if (rc == 0) return Ok();
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(rc, &name);
  if (cuGetErrorString) cuGetErrorString(rc, &text);
  return MakeError(ErrorCode::kInternal, what + " failed: " + (name ? name : "CUDA error") + " (" +
                                             std::to_string(rc) + ")" +
                                             (text ? std::string(": ") + text : std::string()));
}

Result<int> CudaDeviceCount() {
  auto d = CudaDriver::Get();
  if (!d) return std::unexpected(d.error());
  int n = 0;
  SLUICE_RETURN_IF_ERROR((*d)->Check((*d)->cuDeviceGetCount(&n), "cuDeviceGetCount"));
  return n;
}

Result<int> ParseCudaDevice(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.starts_with("cuda:") && device.size() > 5) {
    char* end = nullptr;
    const long v = std::strtol(device.c_str() + 5, &end, 10);
    if (end != nullptr && *end == '\0' && v >= 0 && v < 1024) return static_cast<int>(v);
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "device `" + device + "` is not `cpu`, `cuda` or `cuda:N`");
}

Status StreamWaitEvent(int ordinal, uintptr_t stream, CUevent event) {
  if (event == nullptr) return MakeError(ErrorCode::kInvalidArgument, "no CUDA event to wait on");
  if (stream == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "stream 0 is ambiguous in the DLPack protocol",
                     "pass 1 for the legacy default stream, 2 for the per-thread default stream, "
                     "or a stream handle");
  }
  // One handle per ordinal for the process (leaked on purpose: no primary
  // context release during static destruction, after the driver may be gone).
  static std::mutex mu;
  static auto* devices = new std::map<int, std::shared_ptr<CudaDevice>>();
  std::shared_ptr<CudaDevice> dev;
  {
    std::lock_guard lock(mu);
    auto it = devices->find(ordinal);
    if (it == devices->end()) {
      auto opened = CudaDevice::Open(ordinal);
      if (!opened) return std::unexpected(opened.error());
      it = devices->emplace(ordinal, std::move(*opened)).first;
    }
    dev = it->second;
  }
  CudaDevice::Scope scope(*dev);
  SLUICE_RETURN_IF_ERROR(scope.status());
  return dev->driver().Check(
      dev->driver().cuStreamWaitEvent(reinterpret_cast<CUstream>(stream), event, 0),
      "cuStreamWaitEvent");
}

Status EventSynchronize(CUevent event) {
  if (event == nullptr) return MakeError(ErrorCode::kInvalidArgument, "no CUDA event to wait on");
  auto d = CudaDriver::Get();
  if (!d) return std::unexpected(d.error());
  return (*d)->Check((*d)->cuEventSynchronize(event), "cuEventSynchronize");
}

Result<std::shared_ptr<CudaDevice>> CudaDevice::Open(int ordinal) {
  auto d = CudaDriver::Get();
  if (!d) return std::unexpected(d.error());
  const CudaDriver& drv = **d;
  int count = 0;
  SLUICE_RETURN_IF_ERROR(drv.Check(drv.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count) {
    return MakeError(ErrorCode::kUnsupported,
                     "cuda:" + std::to_string(ordinal) + " requested, " + std::to_string(count) +
                         " CUDA device(s) present",
                     kHint);
  }
  std::shared_ptr<CudaDevice> dev(new CudaDevice());
  dev->driver_ = &drv;
  dev->ordinal_ = ordinal;
  SLUICE_RETURN_IF_ERROR(drv.Check(drv.cuDeviceGet(&dev->device_, ordinal), "cuDeviceGet"));
  char name[256] = {};
  if (drv.cuDeviceGetName(name, sizeof(name) - 1, dev->device_) == 0) dev->name_ = name;
  CUcontext ctx = nullptr;
  SLUICE_RETURN_IF_ERROR(
      drv.Check(drv.cuDevicePrimaryCtxRetain(&ctx, dev->device_), "cuDevicePrimaryCtxRetain"));
  dev->context_ = ctx;
  return dev;
}

CudaDevice::~CudaDevice() {
  if (context_ != nullptr) driver_->cuDevicePrimaryCtxRelease(device_);
}

Result<std::pair<size_t, size_t>> CudaDevice::MemInfo() const {
  Scope scope(*this);
  SLUICE_RETURN_IF_ERROR(scope.status());
  size_t free = 0, total = 0;
  SLUICE_RETURN_IF_ERROR(driver_->Check(driver_->cuMemGetInfo(&free, &total), "cuMemGetInfo"));
  return std::make_pair(free, total);
}

CudaDevice::Scope::Scope(const CudaDevice& d) : d_(d) {
  status_ = d_.driver_->Check(d_.driver_->cuCtxPushCurrent(d_.context_), "cuCtxPushCurrent");
}

CudaDevice::Scope::~Scope() {
  if (status_) {
    CUcontext popped = nullptr;
    d_.driver_->cuCtxPopCurrent(&popped);
  }
}

Result<std::unique_ptr<PinnedBuffer>> PinnedBuffer::Allocate(std::shared_ptr<CudaDevice> device,
                                                             size_t bytes) {
  std::unique_ptr<PinnedBuffer> b(new PinnedBuffer());
  CudaDevice::Scope scope(*device);
  SLUICE_RETURN_IF_ERROR(scope.status());
  void* p = nullptr;
  SLUICE_RETURN_IF_ERROR(device->driver().Check(
      device->driver().cuMemHostAlloc(&p, bytes, kHostAllocPortable),
      "cuMemHostAlloc(" + std::to_string(bytes) + " bytes)"));
  b->device_ = std::move(device);
  b->data_ = static_cast<uint8_t*>(p);
  b->bytes_ = bytes;
  return b;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ == nullptr) return;
  CudaDevice::Scope scope(*device_);
  device_->driver().cuMemFreeHost(data_);
}

Result<std::unique_ptr<DeviceArena>> DeviceArena::Create(std::shared_ptr<CudaDevice> device,
                                                         size_t bytes) {
  std::unique_ptr<DeviceArena> a(new DeviceArena());
  CudaDevice::Scope scope(*device);
  SLUICE_RETURN_IF_ERROR(scope.status());
  bytes = Rounded(std::max<size_t>(bytes, 1));
  CUdeviceptr p = 0;
  SLUICE_RETURN_IF_ERROR(device->driver().Check(
      device->driver().cuMemAlloc(&p, bytes), "cuMemAlloc(" + std::to_string(bytes) + " bytes)"));
  a->device_ = std::move(device);
  a->base_ = p;
  a->bytes_ = bytes;
  return a;
}

DeviceArena::~DeviceArena() {
  if (base_ == 0) return;
  CudaDevice::Scope scope(*device_);
  device_->driver().cuMemFree(base_);
}

Result<CUdeviceptr> DeviceArena::Take(size_t bytes) {
  const size_t need = Rounded(bytes);
  if (used_ + need > bytes_) {
    return MakeError(ErrorCode::kInternal, "device arena of " + std::to_string(bytes_) +
                                               " bytes exhausted (" + std::to_string(used_) +
                                               " used, " + std::to_string(need) + " asked)");
  }
  const CUdeviceptr p = base_ + used_;
  used_ += need;
  return p;
}

Result<std::unique_ptr<CudaStream>> CudaStream::Create(std::shared_ptr<CudaDevice> device) {
  std::unique_ptr<CudaStream> s(new CudaStream());
  CudaDevice::Scope scope(*device);
  SLUICE_RETURN_IF_ERROR(scope.status());
  CUstream stream = nullptr;
  SLUICE_RETURN_IF_ERROR(device->driver().Check(
      device->driver().cuStreamCreate(&stream, kStreamNonBlocking), "cuStreamCreate"));
  s->stream_ = stream;
  s->device_ = std::move(device);
  return s;
}

CudaStream::~CudaStream() {
  if (stream_ == nullptr) return;
  CudaDevice::Scope scope(*device_);
  device_->driver().cuStreamSynchronize(stream_);
  device_->driver().cuStreamDestroy(stream_);
}

Status CudaStream::Synchronize() const {
  CudaDevice::Scope scope(*device_);
  SLUICE_RETURN_IF_ERROR(scope.status());
  return device_->driver().Check(device_->driver().cuStreamSynchronize(stream_),
                                 "cuStreamSynchronize");
}

Result<std::unique_ptr<CudaEvent>> CudaEvent::Create(std::shared_ptr<CudaDevice> device,
                                                     bool timing) {
  std::unique_ptr<CudaEvent> e(new CudaEvent());
  CudaDevice::Scope scope(*device);
  SLUICE_RETURN_IF_ERROR(scope.status());
  CUevent event = nullptr;
  SLUICE_RETURN_IF_ERROR(device->driver().Check(
      device->driver().cuEventCreate(&event, timing ? 0u : kEventDisableTiming),
      "cuEventCreate"));
  e->event_ = event;
  e->device_ = std::move(device);
  return e;
}

CudaEvent::~CudaEvent() {
  if (event_ == nullptr) return;
  CudaDevice::Scope scope(*device_);
  device_->driver().cuEventDestroy(event_);
}

Status CudaEvent::Record(CUstream stream) const {
  CudaDevice::Scope scope(*device_);
  SLUICE_RETURN_IF_ERROR(scope.status());
  return device_->driver().Check(device_->driver().cuEventRecord(event_, stream), "cuEventRecord");
}

Status CudaEvent::Synchronize() const {
  CudaDevice::Scope scope(*device_);
  SLUICE_RETURN_IF_ERROR(scope.status());
  return device_->driver().Check(device_->driver().cuEventSynchronize(event_),
                                 "cuEventSynchronize");
}

}  // namespace sluice::runtime::cuda
