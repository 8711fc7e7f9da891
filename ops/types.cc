#include "ops/types.h"

namespace sluice {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBytes: return "bytes";
    case DType::kUInt8: return "uint8";
    case DType::kInt64: return "int64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kBytes, DType::kUInt8, DType::kInt64, DType::kFloat16, DType::kBFloat16,
                  DType::kFloat32}) {
    if (DTypeName(d) == name) return d;
  }
  return std::nullopt;
}

std::string_view LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kNone: return "none";
    case Layout::kHWC: return "HWC";
    case Layout::kCHW: return "CHW";
  }
  return "?";
}

std::optional<Layout> ParseLayout(std::string_view name) {
  for (Layout l : {Layout::kNone, Layout::kHWC, Layout::kCHW}) {
    if (LayoutName(l) == name) return l;
  }
  return std::nullopt;
}

int DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBytes:
    case DType::kUInt8: return 1;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat32: return 4;
    case DType::kInt64: return 8;
  }
  return 1;
}

bool IsFloat(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32;
}

bool TensorType::is_static() const {
  for (int64_t d : dims) {
    if (d == kDynamic) return false;
  }
  return true;
}

int TensorType::height_axis() const {
  if (rank() != 3) return -1;
  return layout == Layout::kHWC ? 0 : layout == Layout::kCHW ? 1 : -1;
}
int TensorType::width_axis() const {
  if (rank() != 3) return -1;
  return layout == Layout::kHWC ? 1 : layout == Layout::kCHW ? 2 : -1;
}
int TensorType::channel_axis() const {
  if (rank() != 3) return -1;
  return layout == Layout::kHWC ? 2 : layout == Layout::kCHW ? 0 : -1;
}

std::string TensorType::ToString() const {
  std::string out(DTypeName(dtype));
  out += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ",";
    out += dims[i] == kDynamic ? std::string("?") : std::to_string(dims[i]);
  }
  out += "]";
  if (layout != Layout::kNone) {
    out += " ";
    out += LayoutName(layout);
  }
  return out;
}

TensorType EncodedBytes() { return TensorType{DType::kBytes, Layout::kNone, {kDynamic}}; }
TensorType Scalar(DType dtype) { return TensorType{dtype, Layout::kNone, {}}; }
TensorType Image(DType dtype, Layout layout, int64_t height, int64_t width, int64_t channels) {
  if (layout == Layout::kCHW) return TensorType{dtype, layout, {channels, height, width}};
  return TensorType{dtype, Layout::kHWC, {height, width, channels}};
}

}  // namespace sluice
