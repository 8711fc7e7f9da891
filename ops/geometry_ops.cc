// Geometry ops (class resample): resize, center_crop, crop, random_resized_crop,
// random_flip, pad. All take and give an HWC image (uint8 or float) and keep its
// dtype and channel count; results on uint8 are rounded half-to-even and clamped.
//
// Reference semantics follow torchvision (v0.15+, tensor path, antialias=True),
// see ops/reference/resample.h for the filters.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "ops/families.h"
#include "ops/fusion/geometry.h"
#include "ops/random.h"
#include "ops/reference/resample.h"

namespace sluice {
namespace {

using namespace ops_internal;

const std::vector<std::string> kInterpolations = {"bilinear", "bicubic", "area", "nearest"};

ParamDef SizeParam(std::string doc) {
  return ParamDef{.name = "size",
                  .type = ParamType::kIntList,
                  .doc = std::move(doc),
                  .required = true,
                  .min = 1,
                  .list_lengths = {1, 2}};
}

ParamDef InterpolationParam() {
  return ParamDef{.name = "interpolation",
                  .type = ParamType::kEnum,
                  .doc =
                      "Resampling filter: bilinear (triangle), bicubic (Keys, a = -0.5), "
                      "area (box) or nearest.",
                  .default_value = VStr("bilinear"),
                  .choices = kInterpolations};
}

ParamDef AntialiasParam() {
  return ParamDef{.name = "antialias",
                  .type = ParamType::kBool,
                  .doc =
                      "Widen the filter by the downscaling factor (as PIL and torchvision "
                      "antialias=True) so shrinking does not alias.",
                  .default_value = VBool(true)};
}

// The input image type of a single-input geometry op, checked.
Result<TensorType> GeometryInput(std::string_view op, std::span<const TensorType> inputs) {
  SLUICE_RETURN_IF_ERROR(ExpectNumInputs(op, inputs, 1));
  SLUICE_RETURN_IF_ERROR(ExpectHWCImage(op, inputs[0]));
  return inputs[0];
}

// Halide indexes images with int32, so every extent, coordinate and element
// count a geometry op produces must fit in one (the type_inference pass caps
// a sample's bytes the same way, for every op). Arithmetic on spec values is
// checked: a value near 2^63 must be an error, not a wrapped extent.
constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();

Error TooLarge(std::string_view op, const std::string& what, const std::string& hint) {
  return Error{ErrorCode::kInvalidSpec,
               "`" + std::string(op) + "` " + what + ": more than " + std::to_string(kMaxExtent) +
                   " (2^31-1), the most an image extent, coordinate or element count may be",
               hint};
}

// a + b, or nullopt on overflow or a sum over kMaxExtent (a, b >= 0).
std::optional<int64_t> ExtentSum(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum) || sum > kMaxExtent) return std::nullopt;
  return sum;
}

// h * w * channels elements, checked; an error naming the op when over
// kMaxExtent. `at_least`: h x w is the smallest the output can be (resize
// with a one-value size).
Status CheckElements(std::string_view op, int64_t h, int64_t w, int64_t c, bool at_least,
                     const std::string& hint) {
  int64_t hw = 0, n = 0;
  const std::string shape = std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c);
  if (h > kMaxExtent || w > kMaxExtent) {
    return std::unexpected(TooLarge(op, "would make a " + shape + " image", hint));
  }
  if (__builtin_mul_overflow(h, w, &hw) || __builtin_mul_overflow(hw, c, &n) || n > kMaxExtent) {
    return std::unexpected(TooLarge(
        op,
        std::string("would make ") + (at_least ? "at least " : "") + "a " + shape + " image" +
            (n > kMaxExtent ? " (" + std::to_string(n) + " elements)" : std::string()),
        hint));
  }
  return Ok();
}

// `in` with extents h x w, checked (kDynamic passes unchecked).
Result<std::vector<TensorType>> WithHW(std::string_view op, const TensorType& in, int64_t h,
                                       int64_t w, const std::string& hint) {
  const int64_t c = in.dims[2] == kDynamic ? 1 : in.dims[2];
  SLUICE_RETURN_IF_ERROR(CheckElements(op, h == kDynamic ? 1 : h, w == kDynamic ? 1 : w, c,
                                       /*at_least=*/false, hint));
  TensorType out = in;
  out.dims[0] = h;
  out.dims[1] = w;
  return std::vector<TensorType>{out};
}

// The padded extent n + before + after; nullopt when over kMaxExtent.
std::optional<int64_t> PaddedExtent(int64_t n, int64_t before, int64_t after) {
  auto pads = ExtentSum(before, after);
  if (!pads) return std::nullopt;
  return n == kDynamic ? std::optional<int64_t>(kDynamic) : ExtentSum(n, *pads);
}

// ---- reference implementations ---------------------------------------------

Status RefInput(std::string_view op, const RefTensor& in) {
  SLUICE_RETURN_IF_ERROR(ExpectHWCImage(op, in.type));
  if (!in.type.is_static() || in.height() < 1 || in.width() < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "`" + std::string(op) + "` got an empty image " + in.type.ToString());
  }
  return Ok();
}

Result<RefTensor> ResizeRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefInput("resize", in));
  const auto& size = P(p, "size").AsIntList();
  auto [h, w] = size.size() == 1 ? ref::ShorterSideSize(in.height(), in.width(), size[0],
                                                        FindParam(p, "max_size"))
                                 : std::pair{size[0], size[1]};
  return ref::ResizeHWC(in, h, w, ref::ParseFilter(P(p, "interpolation").AsString()),
                        P(p, "antialias").AsBool());
}

// The (top, left) of center_crop's ch x cw window on an h x w image (negative
// where the crop is larger than the image). torchvision: pad (left, top, right,
// bottom) = ((cw-w)//2, (ch-h)//2, (cw-w+1)//2, (ch-h+1)//2) where the crop is
// larger, then top = round((H - ch) / 2) with Python's half-to-even round. Both
// steps together are one crop whose out-of-image part is zeros. Used by the
// reference and by the fused composition.
std::pair<int64_t, int64_t> CenterCropOrigin(int64_t h, int64_t w, int64_t ch, int64_t cw) {
  const int64_t pad_top = ch > h ? (ch - h) / 2 : 0, pad_left = cw > w ? (cw - w) / 2 : 0;
  const int64_t ph = h + pad_top + (ch > h ? (ch - h + 1) / 2 : 0);
  const int64_t pw = w + pad_left + (cw > w ? (cw - w + 1) / 2 : 0);
  const auto top = static_cast<int64_t>(std::nearbyint((ph - ch) / 2.0));
  const auto left = static_cast<int64_t>(std::nearbyint((pw - cw) / 2.0));
  return {top - pad_top, left - pad_left};
}

Result<RefTensor> CenterCropRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefInput("center_crop", in));
  auto [ch, cw] = SizeHW(P(p, "size").AsIntList());
  auto [top, left] = CenterCropOrigin(in.height(), in.width(), ch, cw);
  return ref::CropHWC(in, top, left, ch, cw);
}

Result<RefTensor> CropRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefInput("crop", in));
  return ref::CropHWC(in, P(p, "top").AsInt(), P(p, "left").AsInt(), P(p, "height").AsInt(),
                      P(p, "width").AsInt());
}

Result<RefTensor> RandomResizedCropRef(const RefTensor& in, const ParamList& p, RefContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RefInput("random_resized_crop", in));
  if (!ctx.rng) return MakeError(ErrorCode::kInternal, "random_resized_crop needs ctx.rng");
  const ref::CropBox box = ref::RandomResizedCropBox(
      in.height(), in.width(), P(p, "scale").AsFloatList(), P(p, "ratio").AsFloatList(), *ctx.rng);
  auto [h, w] = SizeHW(P(p, "size").AsIntList());
  return ref::ResizeHWC(ref::CropHWC(in, box.top, box.left, box.height, box.width), h, w,
                        ref::ParseFilter(P(p, "interpolation").AsString()),
                        P(p, "antialias").AsBool());
}

// Draws: rng.Bernoulli(horizontal), then rng.Bernoulli(vertical), always both.
Result<RefTensor> RandomFlipRef(const RefTensor& in, const ParamList& p, RefContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RefInput("random_flip", in));
  if (!ctx.rng) return MakeError(ErrorCode::kInternal, "random_flip needs ctx.rng");
  const bool flip_x = ctx.rng->Bernoulli(P(p, "horizontal").AsFloat());
  const bool flip_y = ctx.rng->Bernoulli(P(p, "vertical").AsFloat());
  RefTensor out = in;
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        out.at(y, x, ch) = in.at(flip_y ? h - 1 - y : y, flip_x ? w - 1 - x : x, ch);
      }
    }
  }
  return out;
}

// Source index for output index i (already shifted by the leading pad) in an
// axis of length n, per padding mode; -1 means "fill".
int64_t PadSource(int64_t i, int64_t n, const std::string& mode) {
  if (i >= 0 && i < n) return i;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
  if (mode == "reflect") return i < 0 ? -i : 2 * (n - 1) - i;
  return -1;
}

Result<RefTensor> PadRef(const RefTensor& in, const ParamList& p, RefContext&) {
  SLUICE_RETURN_IF_ERROR(RefInput("pad", in));
  const auto ltrb = PadLTRB(P(p, "padding").AsIntList());
  const std::string& mode = P(p, "mode").AsString();
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  if (mode == "reflect" && (std::max(ltrb[1], ltrb[3]) >= h || std::max(ltrb[0], ltrb[2]) >= w)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "`pad` with mode: reflect needs padding smaller than the image, got padding " +
                         P(p, "padding").ToString() + " for " + in.type.ToString());
  }
  const float fill = RoundToDType(static_cast<float>(P(p, "fill").AsFloat()), in.type.dtype);
  const auto padded_h = PaddedExtent(h, ltrb[1], ltrb[3]),
             padded_w = PaddedExtent(w, ltrb[0], ltrb[2]);
  if (!padded_h || !padded_w) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "`pad` padding " + P(p, "padding").ToString() + " on " + in.type.ToString() +
                         " makes an extent over " + std::to_string(kMaxExtent));
  }
  SLUICE_RETURN_IF_ERROR(CheckElements("pad", *padded_h, *padded_w, c, false, "pad less"));
  const int64_t oh = *padded_h, ow = *padded_w;
  RefTensor out = RefTensor::Zeros(in.type.dtype, Layout::kHWC, {oh, ow, c});
  for (int64_t y = 0; y < oh; ++y) {
    const int64_t sy = PadSource(y - ltrb[1], h, mode);
    for (int64_t x = 0; x < ow; ++x) {
      const int64_t sx = PadSource(x - ltrb[0], w, mode);
      for (int64_t ch = 0; ch < c; ++ch) {
        out.at(y, x, ch) = (sy < 0 || sx < 0) ? fill : in.at(sy, sx, ch);
      }
    }
  }
  return out;
}

// ---- fused composition (GeometryFusion::compose) ---------------------------
// Each mirrors its reference implementation above on the composer's current
// size, with the same draws in the same order.

void ComposeResize(const ParamList& p, SampleRng*, GeometryComposer& g) {
  const auto& size = P(p, "size").AsIntList();
  auto [h, w] = size.size() == 1
                    ? ref::ShorterSideSize(g.height(), g.width(), size[0], FindParam(p, "max_size"))
                    : std::pair{size[0], size[1]};
  g.Rescale(h, w, ref::ParseFilter(P(p, "interpolation").AsString()), P(p, "antialias").AsBool());
}

void ComposeCenterCrop(const ParamList& p, SampleRng*, GeometryComposer& g) {
  auto [ch, cw] = SizeHW(P(p, "size").AsIntList());
  auto [top, left] = CenterCropOrigin(g.height(), g.width(), ch, cw);
  g.Crop(top, left, ch, cw);
}

void ComposeCrop(const ParamList& p, SampleRng*, GeometryComposer& g) {
  g.Crop(P(p, "top").AsInt(), P(p, "left").AsInt(), P(p, "height").AsInt(), P(p, "width").AsInt());
}

void ComposeRandomResizedCrop(const ParamList& p, SampleRng* rng, GeometryComposer& g) {
  const ref::CropBox box = ref::RandomResizedCropBox(
      g.height(), g.width(), P(p, "scale").AsFloatList(), P(p, "ratio").AsFloatList(), *rng);
  g.Crop(box.top, box.left, box.height, box.width);
  auto [h, w] = SizeHW(P(p, "size").AsIntList());
  g.Rescale(h, w, ref::ParseFilter(P(p, "interpolation").AsString()), P(p, "antialias").AsBool());
}

void ComposeRandomFlip(const ParamList& p, SampleRng* rng, GeometryComposer& g) {
  const bool flip_x = rng->Bernoulli(P(p, "horizontal").AsFloat());
  const bool flip_y = rng->Bernoulli(P(p, "vertical").AsFloat());
  g.Flip(flip_x, flip_y);
}

void ComposePad(const ParamList& p, SampleRng*, GeometryComposer& g) {
  const auto ltrb = PadLTRB(P(p, "padding").AsIntList());
  g.Crop(-ltrb[1], -ltrb[0], g.height() + ltrb[1] + ltrb[3], g.width() + ltrb[0] + ltrb[2]);
  g.SetFill(RoundToDType(static_cast<float>(P(p, "fill").AsFloat()), DType::kUInt8));
}

// One function per op, each returning its definition.

OpDef ResizeOp() {
  return OpDef{
      .name = "resize",
      .op_class = OpClass::kResample,
      .doc =
          "Resizes the image: size [h, w] gives an exact size; size [s] scales the shorter "
          "side to s keeping the aspect ratio (long side = int(s * long / short)), as "
          "torchvision.transforms.Resize.",
      .params =
          {
              SizeParam("[h, w] exact output size, or [s] (or s) for the shorter side."),
              InterpolationParam(),
              AntialiasParam(),
              ParamDef{.name = "max_size",
                       .type = ParamType::kInt,
                       .doc = "With a one-value size: cap on the longer side; the shorter side "
                              "shrinks to keep the aspect ratio.",
                       .min = 1},
          },
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            const auto& size = P(p, "size").AsIntList();
            if (const ParamValue* max_size = FindParam(p, "max_size")) {
              if (size.size() != 1) {
                issues.push_back({"max_size", "max_size only applies when size is one value",
                                  "remove max_size, or give size as one value (the shorter side)"});
              } else if (max_size->AsInt() <= size[0]) {
                issues.push_back({"max_size",
                                  "max_size " + std::to_string(max_size->AsInt()) +
                                      " must be greater than size " + std::to_string(size[0]),
                                  "raise max_size or lower size"});
              }
            }
            return issues;
          },
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = GeometryInput("resize", inputs);
        if (!in) return std::unexpected(in.error());
        const auto& size = P(p, "size").AsIntList();
        if (size.size() == 1) {
          // The shorter side becomes size[0], so the output is at least s x s.
          const int64_t c = in->dims[2] == kDynamic ? 1 : in->dims[2];
          SLUICE_RETURN_IF_ERROR(CheckElements("resize", size[0], size[0], c, /*at_least=*/true,
                                               "use a smaller size"));
          return WithHW("resize", *in, kDynamic, kDynamic, "");
        }
        return WithHW("resize", *in, size[0], size[1], "use a smaller size");
      },
      .reference = ResizeRef,
      .fusion = FusionRole::kGeometry,
      .geometry = {.compose = ComposeResize, .rescales = true},
  };
}

OpDef CenterCropOp() {
  return OpDef{
      .name = "center_crop",
      .op_class = OpClass::kResample,
      .doc =
          "Takes the central [h, w] region; an image smaller than that is first padded "
          "with zeros on both sides, as torchvision.transforms.CenterCrop.",
      .params = {SizeParam("[h, w] output size, or [s] (or s) for a square.")},
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = GeometryInput("center_crop", inputs);
        if (!in) return std::unexpected(in.error());
        auto [h, w] = SizeHW(P(p, "size").AsIntList());
        return WithHW("center_crop", *in, h, w, "use a smaller size");
      },
      .reference = CenterCropRef,
      .fusion = FusionRole::kGeometry,
      .geometry = {.compose = ComposeCenterCrop, .crops = true, .zero_fill = true},
  };
}

OpDef CropOp() {
  return OpDef{
      .name = "crop",
      .op_class = OpClass::kResample,
      .doc =
          "Takes the fixed region at (top, left) of size height x width; parts of the "
          "region outside the image are zeros, as torchvision.transforms.functional.crop.",
      .params =
          {
              ParamDef{.name = "top",
                       .type = ParamType::kInt,
                       .doc = "Row of the region's top edge.",
                       .required = true,
                       .min = 0},
              ParamDef{.name = "left",
                       .type = ParamType::kInt,
                       .doc = "Column of the region's left edge.",
                       .required = true,
                       .min = 0},
              ParamDef{.name = "height",
                       .type = ParamType::kInt,
                       .doc = "Rows in the region (the output height).",
                       .required = true,
                       .min = 1},
              ParamDef{.name = "width",
                       .type = ParamType::kInt,
                       .doc = "Columns in the region (the output width).",
                       .required = true,
                       .min = 1},
          },
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = GeometryInput("crop", inputs);
        if (!in) return std::unexpected(in.error());
        const int64_t top = P(p, "top").AsInt(), left = P(p, "left").AsInt();
        const int64_t height = P(p, "height").AsInt(), width = P(p, "width").AsInt();
        if (!ExtentSum(top, height) || !ExtentSum(left, width)) {
          const bool rows = !ExtentSum(top, height);
          return std::unexpected(TooLarge(
              "crop",
              std::string("puts the region's ") +
                  (rows ? "bottom edge at top + height = " : "right edge at left + width = ") +
                  std::to_string(rows ? top : left) + " + " + std::to_string(rows ? height : width),
              "crop a region inside the image: lower `" + std::string(rows ? "top" : "left") +
                  "`"));
        }
        return WithHW("crop", *in, height, width, "use a smaller height and width");
      },
      .reference = CropRef,
      .fusion = FusionRole::kGeometry,
      .geometry = {.compose = ComposeCrop, .crops = true, .zero_fill = true},
  };
}

OpDef RandomResizedCropOp() {
  return OpDef{
      .name = "random_resized_crop",
      .op_class = OpClass::kResample,
      .doc =
          "Crops a random region (area fraction from `scale`, aspect ratio log-uniform in "
          "`ratio`) and resizes it to `size`, exactly as torchvision RandomResizedCrop.",
      .params =
          {
              SizeParam("[h, w] output size, or [s] (or s) for a square."),
              ParamDef{.name = "scale",
                       .type = ParamType::kFloatList,
                       .doc = "[lo, hi] range of the crop's area as a fraction of the image.",
                       .default_value = VFloats({0.08, 1.0}),
                       .min = 0.0,
                       .max = 1.0,
                       .list_lengths = {2}},
              ParamDef{.name = "ratio",
                       .type = ParamType::kFloatList,
                       .doc = "[lo, hi] range of the crop's aspect ratio (width / height), "
                              "sampled log-uniformly.",
                       .default_value = VFloats({0.75, 1.3333333333333333}),
                       .min = 0.0,
                       .list_lengths = {2}},
              InterpolationParam(),
              AntialiasParam(),
          },
      .random = true,
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            const auto& scale = P(p, "scale").AsFloatList();
            const auto& ratio = P(p, "ratio").AsFloatList();
            if (scale.size() == 2 && scale[0] > scale[1]) {
              issues.push_back(
                  {"scale", "`scale` bounds are reversed: " + FloatsText(scale),
                   "write the smaller bound first: " + FloatsText({scale[1], scale[0]})});
            } else if (scale.size() == 2 && scale[1] <= 0) {
              issues.push_back(
                  {"scale", "scale upper bound must be greater than 0, got " + FloatsText(scale),
                   "use a range such as [0.08, 1.0]"});
            }
            if (ratio.size() == 2 && (ratio[0] <= 0 || ratio[1] <= 0)) {
              issues.push_back({"ratio",
                                "ratio bounds must be greater than 0, got " + FloatsText(ratio),
                                "use a range such as [0.75, 1.3333]"});
            } else if (ratio.size() == 2 && ratio[0] > ratio[1]) {
              issues.push_back(
                  {"ratio", "`ratio` bounds are reversed: " + FloatsText(ratio),
                   "write the smaller bound first: " + FloatsText({ratio[1], ratio[0]})});
            }
            return issues;
          },
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = GeometryInput("random_resized_crop", inputs);
        if (!in) return std::unexpected(in.error());
        auto [h, w] = SizeHW(P(p, "size").AsIntList());
        return WithHW("random_resized_crop", *in, h, w, "use a smaller size");
      },
      .reference = RandomResizedCropRef,
      .fusion = FusionRole::kGeometry,
      .geometry = {.compose = ComposeRandomResizedCrop, .rescales = true, .crops = true},
  };
}

OpDef RandomFlipOp() {
  return OpDef{
      .name = "random_flip",
      .op_class = OpClass::kResample,
      .doc =
          "Mirrors the image left-right with probability `horizontal` and, independently, "
          "top-bottom with probability `vertical`.",
      .params =
          {
              ParamDef{.name = "horizontal",
                       .type = ParamType::kFloat,
                       .doc = "Probability of a left-right flip.",
                       .default_value = VFloat(0.5),
                       .min = 0.0,
                       .max = 1.0},
              ParamDef{.name = "vertical",
                       .type = ParamType::kFloat,
                       .doc = "Probability of a top-bottom flip.",
                       .default_value = VFloat(0.0),
                       .min = 0.0,
                       .max = 1.0},
          },
      .random = true,
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList&) -> Result<std::vector<TensorType>> {
        auto in = GeometryInput("random_flip", inputs);
        if (!in) return std::unexpected(in.error());
        return std::vector<TensorType>{*in};
      },
      .reference = RandomFlipRef,
      .fusion = FusionRole::kGeometry,
      .geometry = {.compose = ComposeRandomFlip},
  };
}

OpDef PadOp() {
  return OpDef{
      .name = "pad",
      .op_class = OpClass::kResample,
      .doc =
          "Pads the borders, as torchvision.transforms.Pad: padding [p] on all sides, "
          "[left/right, top/bottom], or [left, top, right, bottom].",
      .params =
          {
              ParamDef{.name = "padding",
                       .type = ParamType::kIntList,
                       .doc = "Pixels to add: [all], [left/right, top/bottom] or [left, top, "
                              "right, bottom].",
                       .required = true,
                       .min = 0,
                       .list_lengths = {1, 2, 4}},
              ParamDef{.name = "fill",
                       .type = ParamType::kFloat,
                       .doc = "Value of every channel of added pixels with mode: constant.",
                       .default_value = VFloat(0.0)},
              ParamDef{.name = "mode",
                       .type = ParamType::kEnum,
                       .doc = "constant (fill), edge (repeat the border pixel) or reflect "
                              "(mirror without repeating the border; padding < image size).",
                       .default_value = VStr("constant"),
                       .choices = {"constant", "edge", "reflect"}},
          },
      .infer = [](std::span<const TensorType> inputs,
                  const ParamList& p) -> Result<std::vector<TensorType>> {
        auto in = GeometryInput("pad", inputs);
        if (!in) return std::unexpected(in.error());
        const auto ltrb = PadLTRB(P(p, "padding").AsIntList());
        const int64_t h = in->dims[0], w = in->dims[1];
        if (P(p, "mode").AsString() == "reflect" &&
            ((h != kDynamic && std::max(ltrb[1], ltrb[3]) >= h) ||
             (w != kDynamic && std::max(ltrb[0], ltrb[2]) >= w))) {
          return MakeError(ErrorCode::kInvalidSpec,
                           "`pad` with mode: reflect needs padding smaller than the image, got "
                           "padding " +
                               P(p, "padding").ToString() + " for " + in->ToString(),
                           "use mode: edge, or pad less");
        }
        const auto oh = PaddedExtent(h, ltrb[1], ltrb[3]), ow = PaddedExtent(w, ltrb[0], ltrb[2]);
        if (!oh || !ow) {
          return std::unexpected(TooLarge(
              "pad",
              "with padding " + P(p, "padding").ToString() + " would make the image's " +
                  (!oh ? "height " : "width ") +
                  (in->dims[!oh ? 0 : 1] == kDynamic ? "?"
                                                     : std::to_string(in->dims[!oh ? 0 : 1])) +
                  " + " + std::to_string(!oh ? ltrb[1] : ltrb[0]) + " + " +
                  std::to_string(!oh ? ltrb[3] : ltrb[2]) + " pixels",
              "pad by a few pixels, e.g. padding: [4]"));
        }
        return WithHW("pad", *in, *oh, *ow, "pad less");
      },
      .reference = PadRef,
      .fusion = FusionRole::kGeometry,
      .geometry = {.compose = ComposePad,
                   .unfusable = [](const ParamList& p) -> std::string {
                     const std::string& mode = P(p, "mode").AsString();
                     if (mode == "constant") return "";
                     return "`pad` with mode " + mode + " (only constant is fused)";
                   },
                   .fill = [](const ParamList& p) -> std::optional<double> {
                     return P(p, "fill").AsFloat();
                   }},
  };
}

}  // namespace

void RegisterGeometryOps(std::vector<OpDef>& ops) {
  ops.push_back(ResizeOp());
  ops.push_back(CenterCropOp());
  ops.push_back(CropOp());
  ops.push_back(RandomResizedCropOp());
  ops.push_back(RandomFlipOp());
  ops.push_back(PadOp());
}

}  // namespace sluice
