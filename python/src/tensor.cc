// sluice.Tensor (tensor.h): DLPack and numpy's array interface over one
// batch field.
#include "python/src/tensor.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "python/src/errors.h"
#include "runtime/device/cuda_driver.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

// DLPack (v0.x ABI, as numpy >= 1.22 and torch >= 1.10 read it). Declared here
// rather than taken from a header: the layout is a stable C ABI.
struct DLDevice {
  int32_t device_type;  // kDLCPU = 1
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // elements
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
// DLPack 1.0 (the "dltensor_versioned" capsule), exported to consumers that
// ask for it with max_version >= (1, 0), as numpy >= 2.1 does; its flags can
// say read-only (bit 0) or a copy (bit 1), neither of which a sluice export is.
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};

std::optional<DLDataType> DLType(DType t) {
  switch (t) {
    case DType::kUInt8:
      return DLDataType{1, 8, 1};
    case DType::kInt64:
      return DLDataType{0, 64, 1};
    case DType::kFloat16:
      return DLDataType{2, 16, 1};
    case DType::kBFloat16:
      return DLDataType{4, 16, 1};
    case DType::kFloat32:
      return DLDataType{2, 32, 1};
    case DType::kBytes:
      return std::nullopt;
  }
  return std::nullopt;
}

// numpy's array-interface type string; nullopt where numpy has no such type.
std::optional<std::string> TypeStr(DType t) {
  switch (t) {
    case DType::kUInt8:
      return "|u1";
    case DType::kInt64:
      return "<i8";
    case DType::kFloat16:
      return "<f2";
    case DType::kFloat32:
      return "<f4";
    case DType::kBFloat16:
    case DType::kBytes:
      return std::nullopt;
  }
  return std::nullopt;
}

// One field of a batch. Keeps the whole Batch (and so its pool buffer) alive.
class Tensor {
 public:
  Tensor(std::shared_ptr<const Batch> batch, size_t field)
      : batch_(std::move(batch)), field_(field) {}

  const TensorView& view() const { return batch_->fields()[field_]; }
  const std::shared_ptr<const Batch>& batch() const { return batch_; }

  bool on_device() const { return view().device_type == DeviceType::kCUDA; }

  // (DLPack device type, device id): (1, 0) for host memory, (2, N) for cuda:N.
  py::tuple DLPackDevice() const {
    return on_device() ? py::make_tuple(2, view().device_id) : py::make_tuple(1, 0);
  }

  std::string Device() const {
    return on_device() ? "cuda:" + std::to_string(view().device_id) : "cpu";
  }

  // The DLPack stream protocol for a device field: the consumer's `stream`
  // (an int: 1 legacy default, 2 per-thread default, else a CUstream handle;
  // -1: no synchronization) waits on the batch's event; None: host sync.
  // Without the GIL (the event may still be pending).
  void SyncForConsumer(const py::object& stream) const {
    void* event = batch_->cuda_event();
    std::optional<int64_t> handle;
    if (!stream.is_none()) {
      if (!py::isinstance<py::int_>(stream)) {
        RaiseError(Error{ErrorCode::kInvalidArgument,
                         "__dlpack__(stream=...) takes an int stream handle or None",
                         "torch passes torch.cuda.current_stream().cuda_stream (1 for the "
                         "legacy default stream)"});
      }
      handle = stream.cast<int64_t>();
    }
    if (handle == -1) return;      // the consumer asked for no synchronization
    if (event == nullptr) return;  // no device work pending (not a GPU batch)
    const int ordinal = view().device_id;
    Status st;
    {
      py::gil_scoped_release release;
      if (!handle) {
        st = runtime::cuda::EventSynchronize(event);
      } else if (*handle < 0) {
        st = MakeError(ErrorCode::kInvalidArgument, "__dlpack__(stream=" + std::to_string(*handle) +
                                                        ") is not a CUDA stream handle");
      } else {
        st = runtime::cuda::StreamWaitEvent(ordinal, static_cast<uintptr_t>(*handle), event);
      }
    }
    Check(st);
  }

  // __dlpack__(stream, max_version, dl_device, copy), the array API's form.
  // max_version >= (1, 0): a DLPack 1.0 capsule ("dltensor_versioned") with no
  // read-only flag; else the pre-1.0 one ("dltensor"). dl_device other than
  // the tensor's own, or copy=True, raise BufferError (the export never
  // copies). The memory is writable by contract (docs/python.md).
  py::capsule DLPack(py::object stream, py::object max_version, py::object dl_device,
                     py::object copy) const {
    const TensorView& v = view();
    if (!dl_device.is_none() && !dl_device.equal(DLPackDevice())) {
      throw py::buffer_error("__dlpack__(dl_device=...): this tensor is on " + Device() +
                             " and is exported there only");
    }
    if (!copy.is_none() && copy.cast<bool>()) {
      throw py::buffer_error("__dlpack__(copy=True): sluice exports batch memory without a copy");
    }
    if (on_device()) {
      SyncForConsumer(stream);
    } else if (!stream.is_none() &&
               !(py::isinstance<py::int_>(stream) && stream.cast<int64_t>() == -1)) {
      RaiseError(Error{ErrorCode::kInvalidArgument,
                       "__dlpack__(stream=...) is for device tensors; this tensor is on the CPU"});
    }
    auto dtype = DLType(v.dtype);
    if (!dtype) {
      RaiseError(Error{ErrorCode::kUnsupported, "field `" + v.name + "` has dtype " +
                                                    std::string(DTypeName(v.dtype)) +
                                                    ", which DLPack cannot describe"});
    }
    const bool versioned = !max_version.is_none() && max_version[py::int_(0)].cast<int64_t>() >= 1;
    // Owns the shape and strides arrays and a reference to the batch; freed
    // by the DLPack deleter (the consumer's, or the capsule's if unconsumed).
    struct Ctx {
      DLManagedTensor managed;
      DLManagedTensorVersioned managed_versioned;
      std::shared_ptr<const Batch> batch;
      std::vector<int64_t> shape, strides;
    };
    auto* ctx = new Ctx{};
    ctx->batch = batch_;
    ctx->shape = v.shape;
    ctx->strides = v.strides;
    DLTensor& t = versioned ? ctx->managed_versioned.dl_tensor : ctx->managed.dl_tensor;
    t.data = v.data;
    t.device = on_device() ? DLDevice{2, v.device_id} : DLDevice{1, 0};
    t.ndim = static_cast<int32_t>(v.shape.size());
    t.dtype = *dtype;
    t.shape = ctx->shape.data();
    t.strides = ctx->strides.data();
    t.byte_offset = 0;
    // The consumer renames the capsule to "used_dltensor[_versioned]" and
    // calls the deleter itself; an unconsumed capsule deletes here.
    PyObject* cap = nullptr;
    if (versioned) {
      DLManagedTensorVersioned& m = ctx->managed_versioned;
      m.version = DLPackVersion{1, 0};
      m.flags = 0;  // not DLPACK_FLAG_BITMASK_READ_ONLY: writable; not IS_COPIED
      m.manager_ctx = ctx;
      m.deleter = [](DLManagedTensorVersioned* m) { delete static_cast<Ctx*>(m->manager_ctx); };
      cap = PyCapsule_New(&m, "dltensor_versioned", [](PyObject* self) {
        if (PyCapsule_IsValid(self, "dltensor_versioned")) {
          auto* m = static_cast<DLManagedTensorVersioned*>(
              PyCapsule_GetPointer(self, "dltensor_versioned"));
          if (m && m->deleter) m->deleter(m);
        } else {
          PyErr_Clear();
        }
      });
    } else {
      DLManagedTensor& m = ctx->managed;
      m.manager_ctx = ctx;
      m.deleter = [](DLManagedTensor* m) { delete static_cast<Ctx*>(m->manager_ctx); };
      cap = PyCapsule_New(&m, "dltensor", [](PyObject* self) {
        if (PyCapsule_IsValid(self, "dltensor")) {
          auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(self, "dltensor"));
          if (m && m->deleter) m->deleter(m);
        } else {
          PyErr_Clear();
        }
      });
    }
    if (cap == nullptr) {
      delete ctx;
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::capsule>(cap);
  }

  py::dict ArrayInterface() const {
    const TensorView& v = view();
    if (on_device()) {
      RaiseError(Error{ErrorCode::kUnsupported,
                       "field `" + v.name + "` is in CUDA device memory (" + Device() +
                           "); numpy reads host memory only",
                       "use torch.from_dlpack(tensor) for a CUDA tensor without a copy, or "
                       "plan.loader(device=\"cpu\") for host batches"});
    }
    auto typestr = TypeStr(v.dtype);
    if (!typestr) {
      RaiseError(Error{ErrorCode::kUnsupported,
                       "field `" + v.name + "` is " + std::string(DTypeName(v.dtype)) +
                           ", which numpy has no type for",
                       "use torch.from_dlpack(tensor) (DLPack carries bfloat16), or cast to "
                       "float16/float32 in the spec"});
    }
    py::dict d;
    d["version"] = 3;
    d["shape"] = py::tuple(py::cast(v.shape));
    d["typestr"] = *typestr;
    d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(v.data), false);
    d["strides"] = py::none();  // C-contiguous
    return d;
  }

 private:
  std::shared_ptr<const Batch> batch_;
  size_t field_;
};

}  // namespace

py::object MakeTensor(std::shared_ptr<const Batch> batch, size_t field) {
  return py::cast(Tensor(std::move(batch), field));
}

void BindTensor(py::module_& m) {
  py::class_<Tensor>(m, "Tensor",
                     "One field of a batch (row-major; host memory, or CUDA device memory "
                     "on the GPU path: see `device`). Zero-copy into numpy (numpy.asarray / "
                     "numpy.from_dlpack; host fields only) and torch (torch.from_dlpack; a "
                     "CUDA tensor for device fields). Keeps the batch buffer alive until "
                     "every view of it is gone.")
      .def("__dlpack__", &Tensor::DLPack, py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
           py::arg("copy") = py::none())
      .def("__dlpack_device__", &Tensor::DLPackDevice)
      .def_property_readonly("device", &Tensor::Device)
      .def_property_readonly("__array_interface__", &Tensor::ArrayInterface)
      .def_property_readonly("name", [](const Tensor& t) { return t.view().name; })
      .def_property_readonly("dtype",
                             [](const Tensor& t) { return std::string(DTypeName(t.view().dtype)); })
      .def_property_readonly("shape",
                             [](const Tensor& t) { return py::tuple(py::cast(t.view().shape)); })
      .def_property_readonly("strides",
                             [](const Tensor& t) { return py::tuple(py::cast(t.view().strides)); })
      .def_property_readonly("nbytes", [](const Tensor& t) { return t.view().bytes; })
      .def_property_readonly(
          "data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.view().data); })
      .def_property_readonly("epoch", [](const Tensor& t) { return t.batch()->epoch(); })
      .def_property_readonly("batch_index", [](const Tensor& t) { return t.batch()->index(); })
      .def_property_readonly("sample_indices",
                             [](const Tensor& t) { return t.batch()->sample_indices(); })
      .def("__len__",
           [](const Tensor& t) { return t.view().shape.empty() ? 0 : t.view().shape[0]; })
      .def("__repr__", [](const Tensor& t) {
        std::string s =
            "sluice.Tensor(" + t.view().name + ", " + std::string(DTypeName(t.view().dtype)) + "[";
        for (size_t i = 0; i < t.view().shape.size(); ++i)
          s += (i ? "," : "") + std::to_string(t.view().shape[i]);
        return s + "])";
      });
}

}  // namespace sluice::python
