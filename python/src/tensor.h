// sluice.Tensor: one field of a batch, handed to numpy and torch without a
// copy (__dlpack__, __dlpack_device__, __array_interface__). A Tensor holds a
// shared_ptr to its Batch, and so does every DLPack capsule or numpy array
// made from it: the batch buffer returns to the loader's pool when the last of
// them is gone. Device fields follow the DLPack stream protocol (see
// sluice_module.cc's file comment).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>

#include "sluice/sluice.h"

namespace sluice::python {

// The batch's field `field` as a sluice.Tensor (Python object).
pybind11::object MakeTensor(std::shared_ptr<const Batch> batch, size_t field);

// Registers the sluice.Tensor class.
void BindTensor(pybind11::module_& m);

}  // namespace sluice::python
