// JPEG decoding with region of interest and DCT-domain downscaling, on the
// libjpeg API of libjpeg-turbo.
//
// A request names a crop rectangle in full-resolution pixels and the smallest
// output size the caller needs from that crop. The decoder picks the smallest
// DCT scale 1/d (d in 8, 4, 2, 1) whose scaled crop still covers that size,
// decodes only the iMCU columns the crop touches (jpeg_crop_scanline), skips
// the rows above it (jpeg_skip_scanlines), stops after its last row, and
// reports exactly what it decoded so the next stage (resize) can map the crop
// into the buffer.
//
// Errors never abort, exit or print: libjpeg's fatal errors become kCorruptData
// carrying libjpeg's message; warnings are counted (a premature end of data is
// always an error, other warnings only with fail_on_warning).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "runtime/decode/image_buffer.h"
#include "sluice/result.h"

namespace sluice::runtime {

// Images larger than this are rejected as corrupt before any pixel buffer is
// allocated.
inline constexpr int kMaxJpegSide = 32768;
inline constexpr int64_t kMaxJpegPixels = 200'000'000;

enum class JpegColorSpace { kUnknown, kGray, kYCbCr, kRGB, kCMYK, kYCCK };

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;  // in the file: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
  JpegColorSpace colorspace = JpegColorSpace::kUnknown;
  bool progressive = false;
};

// A rectangle of pixels: columns [x, x + width), rows [y, y + height).
struct PixelRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  bool operator==(const PixelRect&) const = default;
};

enum class OutputColor { kRGB, kGray };

struct DecodeRequest {
  // Region wanted, in full-resolution pixels; must have positive size and lie
  // inside the image. Empty = the whole image.
  std::optional<PixelRect> crop;
  // The smallest size (in pixels) the crop must still have after DCT scaling.
  // When both are <= 0 the image is decoded at full resolution. Otherwise the
  // decoder uses the largest d in {8, 4, 2, 1} with crop.width / d >= min_width
  // and crop.height / d >= min_height (exact, not rounded).
  int min_width = 0;
  int min_height = 0;
  // kRGB: 3 channels (grayscale, YCbCr, RGB, CMYK and YCCK files all convert).
  // kGray: 1 channel (luma, BT.601 weights).
  OutputColor color = OutputColor::kRGB;
  // Treat any libjpeg warning (e.g. "extraneous bytes before marker") as
  // kCorruptData. A premature end of data is an error either way.
  bool fail_on_warning = false;
  // libjpeg's JDCT_IFAST instead of the accurate JDCT_ISLOW.
  bool fast_dct = false;
};

struct DecodedRegion {
  int scale_denom = 1;    // the output is at 1/scale_denom of full resolution
  int scaled_width = 0;   // the whole image at that scale: ceil(width / d)
  int scaled_height = 0;  // ceil(height / d)
  // The pixels the output buffer holds, in scaled-image coordinates; the
  // buffer is decoded.width x decoded.height. Columns may extend beyond the
  // crop (iMCU alignment plus a small margin); the crop's own pixels equal
  // those of a whole-image decode at the same scale, bit for bit, while the
  // outermost margin columns may differ slightly.
  PixelRect decoded;
  // The requested crop mapped into the buffer, in (possibly fractional) buffer
  // pixels: the crop's full-resolution edges divided by d, minus decoded.x/y.
  double crop_x = 0, crop_y = 0, crop_width = 0, crop_height = 0;
  // The smallest whole-pixel rectangle of the buffer containing that crop.
  PixelRect crop_in_buffer;
  int warnings = 0;  // libjpeg warnings seen (and tolerated)
};

// Parses the headers only (no pixel decode). Errors: kCorruptData.
Result<JpegInfo> ReadJpegHeader(std::span<const uint8_t> data);

// Decodes `data` into `out` (reused; it grows only when needed) as described
// above. Errors: kCorruptData (not a JPEG, truncated, damaged, absurd
// dimensions, unsupported colour space), kInvalidArgument (crop outside the
// image or empty).
Result<DecodedRegion> DecodeJpeg(std::span<const uint8_t> data, const DecodeRequest& request,
                                 ImageBuffer& out);

// True if the bytes start with a JPEG SOI marker followed by another marker.
bool LooksLikeJpeg(std::span<const uint8_t> data);

}  // namespace sluice::runtime
