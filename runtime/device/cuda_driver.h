// The CUDA driver API, loaded at run time (dlopen "libcuda.so.1"): Sluice has
// no link-time CUDA dependency, so one binary runs on machines with and
// without a GPU.
//
// CudaDriver::Get() loads the library and calls cuInit once per process; every
// failure (no libcuda, a missing entry point, cuInit failing: no device, or a
// driver too old) becomes a Result error with the reason, never a crash. The
// small RAII types below own what they allocate and free it in their
// destructor, making the device's primary context current for the call
// (push/pop), so they can be used from any thread.
//
// Thread safety: CudaDriver is immutable after Get(). CudaDevice, DeviceArena,
// PinnedBuffer, CudaStream and CudaEvent may be used from several threads as
// the driver allows (the driver API is thread-safe); they are not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sluice/result.h"

namespace sluice::runtime::cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // NOLINT: the driver's typedef
using CUcontext = void*;
using CUstream = void*;
using CUevent = void*;

struct CudaDriver {
  // Loads and initializes the driver once. Errors: kUnsupported with the reason
  // ("libcuda.so.1 not loadable: ...", "cuInit failed: CUDA_ERROR_NO_DEVICE ...").
  static Result<const CudaDriver*> Get();

  // `rc` as a Status: kInternal "WHAT: CUDA_ERROR_NAME (code): description".
  Status Check(CUresult rc, const std::string& what) const;

  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext*) = nullptr;
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned) = nullptr;
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;
  CUresult (*cuMemGetInfo)(size_t*, size_t*) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  void* library = nullptr;
};

// Devices the driver sees. Errors: as CudaDriver::Get.
Result<int> CudaDeviceCount();

// Parses "cuda" (= device 0) or "cuda:N". Error kInvalidArgument otherwise.
Result<int> ParseCudaDevice(const std::string& device);

// DLPack / CUDA stream-protocol handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
inline constexpr uintptr_t kLegacyDefaultStream = 1;
inline constexpr uintptr_t kPerThreadDefaultStream = 2;

// Makes `stream` wait, on the device, until `event` has completed; the host
// does not block. `stream` is a CUstream of device `ordinal`'s primary context
// or one of the special handles above (the legacy / per-thread default stream
// of that context, which is made current for the call). `event` may belong to
// any context of the process. Errors: those of CudaDriver::Get and
// CudaDevice::Open; kInvalidArgument for a null event or stream 0 (ambiguous
// in the DLPack protocol); kInternal from the driver. Thread-safe; the
// device handle is opened once per ordinal and kept for the process.
Status StreamWaitEvent(int ordinal, uintptr_t stream, CUevent event);

// Blocks the calling thread until `event` has completed. Errors: those of
// CudaDriver::Get; kInvalidArgument for a null event; kInternal from the driver.
Status EventSynchronize(CUevent event);

// One device's primary context (shared with PyTorch and every other user of
// the runtime API in the process), retained for this object's life.
class CudaDevice {
 public:
  // Errors: those of CudaDriver::Get; kUnsupported when `ordinal` is not a
  // device ("cuda:1 requested, 1 device present").
  static Result<std::shared_ptr<CudaDevice>> Open(int ordinal);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  const CudaDriver& driver() const { return *driver_; }
  int ordinal() const { return ordinal_; }
  const std::string& name() const { return name_; }
  CUcontext context() const { return context_; }
  // (free, total) device memory in bytes.
  Result<std::pair<size_t, size_t>> MemInfo() const;

  // Makes the context current on this thread for the guard's scope.
  class Scope {
   public:
    explicit Scope(const CudaDevice& d);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    const Status& status() const { return status_; }

   private:
    const CudaDevice& d_;
    Status status_;
  };

 private:
  CudaDevice() = default;
  const CudaDriver* driver_ = nullptr;
  int ordinal_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  std::string name_;
};

// Page-locked host memory (cuMemHostAlloc, portable), 64-byte aligned or better.
class PinnedBuffer {
 public:
  static Result<std::unique_ptr<PinnedBuffer>> Allocate(std::shared_ptr<CudaDevice> device,
                                                        size_t bytes);
  ~PinnedBuffer();
  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  PinnedBuffer() = default;
  std::shared_ptr<CudaDevice> device_;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

// A fixed pool of device memory: one cuMemAlloc at Create, carved into
// 256-byte aligned ranges by Take(); nothing is freed before the arena is.
// Take() is not thread-safe (call it while setting up).
class DeviceArena {
 public:
  static Result<std::unique_ptr<DeviceArena>> Create(std::shared_ptr<CudaDevice> device,
                                                     size_t bytes);
  ~DeviceArena();
  // The next `bytes`, or kInternal when the arena is exhausted (a sizing bug).
  Result<CUdeviceptr> Take(size_t bytes);
  size_t size() const { return bytes_; }
  size_t used() const { return used_; }
  // Bytes an arena needs for these ranges (each rounded up to the alignment).
  static size_t Rounded(size_t bytes) { return (bytes + 255) / 256 * 256; }

 private:
  DeviceArena() = default;
  std::shared_ptr<CudaDevice> device_;
  CUdeviceptr base_ = 0;
  size_t bytes_ = 0, used_ = 0;
};

// A non-blocking stream (does not synchronize with the legacy default stream).
class CudaStream {
 public:
  static Result<std::unique_ptr<CudaStream>> Create(std::shared_ptr<CudaDevice> device);
  ~CudaStream();
  CUstream get() const { return stream_; }
  Status Synchronize() const;

 private:
  CudaStream() = default;
  std::shared_ptr<CudaDevice> device_;
  CUstream stream_ = nullptr;
};

// An event; `timing` false gives a cheaper event (CU_EVENT_DISABLE_TIMING).
class CudaEvent {
 public:
  static Result<std::unique_ptr<CudaEvent>> Create(std::shared_ptr<CudaDevice> device,
                                                   bool timing = false);
  ~CudaEvent();
  CUevent get() const { return event_; }
  Status Record(CUstream stream) const;
  Status Synchronize() const;

 private:
  CudaEvent() = default;
  std::shared_ptr<CudaDevice> device_;
  CUevent event_ = nullptr;
};

}  // namespace sluice::runtime::cuda
