// A batch handed to the training loop: one typed tensor view per batch field.
//
// Ownership: a Batch is a move-only handle on one buffer of its Loader's fixed
// pool. The views point into that buffer and stay valid until the Batch is
// destroyed (or moved from); destroying it returns the buffer to the pool so
// the loader can fill it again. A Batch may outlive its Loader (the pool is
// freed with the last handle). Holding as many batches as the pool has buffers
// stalls the loader (Loader::Next then reports kInvalidArgument instead of
// blocking forever).
//
// Thread safety: a Batch is not shared; its views may be read from any thread
// while the Batch is alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sluice/types.h"

namespace sluice {

namespace runtime {
class LoaderCore;
}

// Where a view's memory is (DLPack's kDLCPU / kDLCUDA).
enum class DeviceType { kCPU = 1, kCUDA = 2 };

// A dense view of one field: element (i0, i1, ...) is at
// data + sum(i_k * strides[k]) elements (strides in elements, not bytes).
struct TensorView {
  std::string name;             // the batch field, e.g. "image", "label"
  DType dtype = DType::kUInt8;  // element type
  std::vector<int64_t> shape;   // batch size first: e.g. [256, 3, 224, 224]
  std::vector<int64_t> strides; // elements; row-major dense
  void* data = nullptr;         // host pointer, or a CUdeviceptr for kCUDA
  size_t bytes = 0;             // whole field
  DeviceType device_type = DeviceType::kCPU;
  int device_id = 0;            // the CUDA ordinal for kCUDA

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

class Batch {
 public:
  Batch() = default;
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;
  ~Batch();

  // False for a default-constructed or moved-from Batch.
  bool valid() const { return core_ != nullptr; }
  // Fields in the plan's batch.fields order (sorted by name).
  const std::vector<TensorView>& fields() const { return fields_; }
  // The field named `name`, or nullptr.
  const TensorView* field(const std::string& name) const;
  int64_t size() const { return size_; }        // samples in the batch
  uint64_t epoch() const { return epoch_; }      // epoch it belongs to
  uint64_t index() const { return index_; }      // batch number within its epoch
  // Dataset indices of the samples in the slots (after skip/replace substitution).
  const std::vector<uint64_t>& sample_indices() const { return samples_; }
  // GPU path only (fields with DeviceType::kCUDA): the CUevent recorded after
  // the batch's device work on the loader's stream, else nullptr. With
  // LoaderOptions::wait_for_device (the default) it has completed when Next()
  // returns; otherwise make the consumer's stream wait on it
  // (cuStreamWaitEvent / torch.cuda.Stream.wait_event) before reading. The
  // device memory is reused once the Batch is destroyed: keep the Batch alive
  // until the device work that reads it has completed.
  void* cuda_event() const { return cuda_event_; }

 private:
  friend class runtime::LoaderCore;
  void Release();

  std::shared_ptr<runtime::LoaderCore> core_;
  int buffer_ = -1;
  std::vector<TensorView> fields_;
  std::vector<uint64_t> samples_;
  int64_t size_ = 0;
  uint64_t epoch_ = 0;
  uint64_t index_ = 0;
  void* cuda_event_ = nullptr;
};

}  // namespace sluice
