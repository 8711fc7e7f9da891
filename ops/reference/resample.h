// Reference image resampling shared by resize and random_resized_crop.
//
// Separable, PIL-style (ImagingResample, which torchvision antialias=True
// matches): output pixel i along an axis has its centre at (i + 0.5) * in/out
// in input coordinates (half-pixel centres); the filter is evaluated at
// (j + 0.5 - centre) / s for input pixels j whose centre lies within the
// support, where s = max(1, in/out) when antialiasing (filter widened by the
// downscaling factor) and 1 otherwise; weights are normalised to sum 1, so the
// border is handled by renormalising over the pixels inside the image.
// Filters: bilinear = triangle (support 1), bicubic = Keys with a = -0.5
// (support 2), area = box (support 0.5, 1 on (-0.5, 0.5]). nearest takes input
// pixel min(floor(i * in/out), in - 1) (torch's mode="nearest").
//
// The horizontal pass runs first, then the vertical one, in double precision
// with no rounding in between; the result is rounded once with RoundToDType
// (uint8: half to even and clamped). PIL rounds to uint8 after each pass, so
// uint8 results may differ from PIL by 1.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/param.h"
#include "ops/random.h"
#include "ops/reference/ref_tensor.h"

namespace sluice::ref {

enum class Filter { kBilinear, kBicubic, kArea, kNearest };
// "bilinear" | "bicubic" | "area" | "nearest"; anything else is kBilinear.
Filter ParseFilter(std::string_view name);

// The taps of one output pixel: input pixels first..first+weights.size()-1.
struct Taps {
  int64_t first = 0;
  std::vector<double> weights;
};
std::vector<Taps> ResampleTaps(int64_t in_size, int64_t out_size, Filter filter, bool antialias);

// The output size (height, width) of a resize to shorter side `size`, as
// torchvision's _compute_resized_output_size: the longer side is scaled by
// size / shorter and truncated; with `max_size` (may be null) the longer side
// is capped at it and the shorter one scaled down to match.
std::pair<int64_t, int64_t> ShorterSideSize(int64_t height, int64_t width, int64_t size,
                                            const ParamValue* max_size);

// Resizes an HWC image to out_h x out_w; dtype and channels are kept.
RefTensor ResizeHWC(const RefTensor& in, int64_t out_h, int64_t out_w, Filter filter,
                    bool antialias);

// The region [top, top+height) x [left, left+width) of an HWC image; pixels
// outside the image are `fill` (rounded to the dtype).
RefTensor CropHWC(const RefTensor& in, int64_t top, int64_t left, int64_t height, int64_t width,
                  float fill = 0.0f);

// torchvision RandomResizedCrop.get_params, draw for draw: up to 10 tries of
//   area = H*W * rng.Uniform(scale[0], scale[1]);
//   r = exp(rng.Uniform(log(ratio[0]), log(ratio[1])));
//   w = round(sqrt(area * r)), h = round(sqrt(area / r))   (half to even, as Python)
//   accepted if 0 < w <= W and 0 < h <= H: top = rng.UniformInt(0, H - h),
//   left = rng.UniformInt(0, W - w);
// after 10 rejections the central crop with the aspect ratio clamped to
// [ratio[0], ratio[1]] (whole image when it is within range). Draw order per
// try: scale, then ratio; on acceptance: top, then left.
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};
CropBox RandomResizedCropBox(int64_t height, int64_t width, const std::vector<double>& scale,
                             const std::vector<double>& ratio, SampleRng& rng);

}  // namespace sluice::ref
