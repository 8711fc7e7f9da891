// Tensor types shared by the op registry, the IR, the runtime and the public
// API (Batch fields are typed by them; ops/types.h forwards here).
//
// A TensorType describes what flows along one edge of the per-sample graph:
// its element type, its rank and extents (static or dynamic) and, for images,
// its memory layout. Encoded payloads (a JPEG file's bytes) have dtype kBytes,
// rank 1 and a dynamic extent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

enum class DType { kBytes, kUInt8, kInt64, kFloat16, kBFloat16, kFloat32 };
enum class Layout { kNone, kHWC, kCHW };

// Short names used by the spec, the IR printer and plan.json:
// bytes, uint8, int64, float16, bfloat16, float32 / none, HWC, CHW.
std::string_view DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);
std::string_view LayoutName(Layout layout);
std::optional<Layout> ParseLayout(std::string_view name);
// Bytes per element; 1 for kBytes.
int DTypeSize(DType dtype);
bool IsFloat(DType dtype);

inline constexpr int64_t kDynamic = -1;

struct TensorType {
  DType dtype = DType::kUInt8;
  Layout layout = Layout::kNone;
  std::vector<int64_t> dims;  // kDynamic for an extent known only at run time

  bool encoded() const { return dtype == DType::kBytes; }
  int rank() const { return static_cast<int>(dims.size()); }
  bool is_static() const;
  // Index of the height/width/channel dimension for HWC or CHW images, else -1.
  int height_axis() const;
  int width_axis() const;
  int channel_axis() const;
  // Stable text form: "uint8[?,?,3] HWC", "int64[]", "bytes[?]".
  std::string ToString() const;
  bool operator==(const TensorType&) const = default;
};

// Constructors for the common cases.
TensorType EncodedBytes();
TensorType Scalar(DType dtype);
TensorType Image(DType dtype, Layout layout, int64_t height, int64_t width, int64_t channels);

}  // namespace sluice
