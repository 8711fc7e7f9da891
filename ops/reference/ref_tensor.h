// RefTensor: the plain, slow, obviously-correct value type that reference
// implementations compute on. Tests compare generated kernels against it.
//
// Element values are stored as float whatever the nominal dtype: uint8 values
// are integers in [0, 255]; float16/bfloat16 values are already rounded to that
// precision (see RoundToDType). Encoded payloads live in `bytes`.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/types.h"

namespace sluice {

struct RefTensor {
  TensorType type;             // dims are all static here
  std::vector<float> data;     // row-major over type.dims
  std::vector<uint8_t> bytes;  // only for DType::kBytes

  static RefTensor Zeros(DType dtype, Layout layout, std::vector<int64_t> dims);
  static RefTensor Encoded(std::vector<uint8_t> bytes);

  int64_t num_elements() const;
  // Image accessors (rank-3 HWC or CHW): element at (y, x, c) whatever the layout.
  float& at(int64_t y, int64_t x, int64_t c);
  float at(int64_t y, int64_t x, int64_t c) const;
  int64_t height() const { return type.dims[type.height_axis()]; }
  int64_t width() const { return type.dims[type.width_axis()]; }
  int64_t channels() const { return type.dims[type.channel_axis()]; }
};

// Rounds a float to what `dtype` can hold: uint8 saturates and rounds half to
// even; float16 and bfloat16 round to nearest even; float32 and int64 unchanged.
float RoundToDType(float value, DType dtype);

}  // namespace sluice
