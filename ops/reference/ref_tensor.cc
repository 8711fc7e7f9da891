#include "ops/reference/ref_tensor.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace sluice {

RefTensor RefTensor::Zeros(DType dtype, Layout layout, std::vector<int64_t> dims) {
  RefTensor t;
  t.type = TensorType{dtype, layout, std::move(dims)};
  t.data.assign(static_cast<size_t>(t.num_elements()), 0.0f);
  return t;
}

RefTensor RefTensor::Encoded(std::vector<uint8_t> bytes) {
  RefTensor t;
  t.type = TensorType{DType::kBytes, Layout::kNone, {static_cast<int64_t>(bytes.size())}};
  t.bytes = std::move(bytes);
  return t;
}

int64_t RefTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : type.dims) n *= d;
  return n;
}

namespace {
int64_t Offset(const TensorType& type, int64_t y, int64_t x, int64_t c) {
  if (type.layout == Layout::kCHW) return (c * type.dims[1] + y) * type.dims[2] + x;
  return (y * type.dims[1] + x) * type.dims[2] + c;
}
}  // namespace

float& RefTensor::at(int64_t y, int64_t x, int64_t c) { return data[Offset(type, y, x, c)]; }
float RefTensor::at(int64_t y, int64_t x, int64_t c) const { return data[Offset(type, y, x, c)]; }

namespace {

// Nearest-even rounding to IEEE binary16, computed in float arithmetic: scale
// by a power of two so the last kept bit is the units digit, round, scale back
// (both scalings are exact).
float RoundToHalf(float v) {
  if (std::isnan(v) || std::isinf(v) || v == 0.0f) return v;
  const float a = std::fabs(v);
  float r;
  if (a < 0x1p-14f) {
    r = std::nearbyint(a * 0x1p24f) * 0x1p-24f;  // subnormal: quantum 2^-24
  } else {
    int exp = 0;
    std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1): 11 significant bits -> quantum 2^(exp-11)
    r = std::ldexp(std::nearbyint(std::ldexp(a, 11 - exp)), exp - 11);
  }
  if (r > 65504.0f) r = INFINITY;
  return std::copysign(r, v);
}

// Nearest-even rounding to bfloat16 (the top 16 bits of a float32).
float RoundToBFloat16(float v) {
  if (std::isnan(v)) return v;
  uint32_t bits = std::bit_cast<uint32_t>(v);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // overflow carries into the exponent -> inf
  bits &= 0xFFFF0000u;
  return std::bit_cast<float>(bits);
}

}  // namespace

float RoundToDType(float value, DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      if (std::isnan(value)) return 0.0f;
      if (value <= 0.0f) return 0.0f;
      if (value >= 255.0f) return 255.0f;
      return std::nearbyint(value);  // default rounding mode: half to even
    case DType::kFloat16:
      return RoundToHalf(value);
    case DType::kBFloat16:
      return RoundToBFloat16(value);
    case DType::kBytes:
    case DType::kInt64:
    case DType::kFloat32:
      return value;
  }
  return value;
}

}  // namespace sluice
