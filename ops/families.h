// Internal to ops/: one registration function per op family file, and the
// small helpers those files share (value constructors, type-rule checks).
//
// Registration functions append OpDefs; registry.cc calls each once, on first
// use of the registry, and wraps every entry so that `check`, `infer` and
// `reference` see a ParamList with all defaults filled (see WithDefaults).
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/registry.h"

// Op entries are written with designated initializers that name only the
// fields they set; -Wextra would flag every omitted one.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace sluice {

void RegisterSourceOps(std::vector<OpDef>& ops);     // source_ops.cc: image_folder, file_list
void RegisterBatchOps(std::vector<OpDef>& ops);      // batch_ops.cc: batch
void RegisterDecodeOps(std::vector<OpDef>& ops);     // decode_ops.cc: decode_jpeg
void RegisterGeometryOps(std::vector<OpDef>& ops);   // geometry_ops.cc: resize, crops, flip, pad
void RegisterColorOps(std::vector<OpDef>& ops);      // color_ops.cc: color_jitter, grayscale
void RegisterPointwiseOps(std::vector<OpDef>& ops);  // pointwise_ops.cc: normalize, layout, cast

namespace ops_internal {

// Value constructors for declaring defaults.
inline ParamValue VBool(bool b) { return ParamValue{b}; }
inline ParamValue VInt(int64_t i) { return ParamValue{i}; }
inline ParamValue VFloat(double d) { return ParamValue{d}; }
inline ParamValue VStr(std::string s) { return ParamValue{std::move(s)}; }
inline ParamValue VInts(std::vector<int64_t> v) { return ParamValue{std::move(v)}; }
inline ParamValue VFloats(std::vector<double> v) { return ParamValue{std::move(v)}; }

// Parameter accessors for check/infer/reference. The registry wrapper fills
// defaults and rejects missing required parameters before these run, so a
// declared parameter with a default or `required` is always present.
inline const ParamValue& P(const ParamList& params, const std::string& name) {
  return params.at(name);
}

// Type-rule helpers. Every message is a complete sentence naming the op in
// backticks and the offending type in its text form; code kInvalidSpec.
Status ExpectNumInputs(std::string_view op, std::span<const TensorType> inputs, int n);
// A decoded rank-3 image (HWC or CHW) of uint8 or a float dtype.
Status ExpectImage(std::string_view op, const TensorType& t);
// ExpectImage plus layout HWC (geometry ops).
Status ExpectHWCImage(std::string_view op, const TensorType& t);

// The [h, w] an int list of length 1 ([s] = square) or 2 names.
inline std::pair<int64_t, int64_t> SizeHW(const std::vector<int64_t>& size) {
  return size.size() == 1 ? std::pair{size[0], size[0]} : std::pair{size[0], size[1]};
}

// torchvision padding forms as [left, top, right, bottom]: [p], [lr, tb], [l, t, r, b].
inline std::array<int64_t, 4> PadLTRB(const std::vector<int64_t>& p) {
  if (p.size() == 1) return {p[0], p[0], p[0], p[0]};
  if (p.size() == 2) return {p[0], p[1], p[0], p[1]};
  return {p[0], p[1], p[2], p[3]};
}

// Formats a list of doubles as in the spec: [0.9,0.1].
std::string FloatsText(const std::vector<double>& v);

}  // namespace ops_internal
}  // namespace sluice
