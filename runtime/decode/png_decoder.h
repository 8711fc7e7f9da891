// PNG decoding on libspng: any PNG colour type and bit depth (1-16 bits, gray,
// gray + alpha, RGB, RGBA, palette, interlaced or not) -> uint8 HWC.
//
// Conversions (chosen to match PIL's `Image.open(f).convert(mode)`):
// - 16-bit samples keep their high byte (v >> 8), as PIL's PNG reader does for
//   RGB(A) files; 1/2/4-bit gray is scaled to 0..255 (v * 255 / (2^bits - 1)).
// - color rgb: gray is replicated, palette entries are looked up; color gray:
//   colour becomes luma L = (19595 R + 38470 G + 7471 B + 32768) >> 16 (PIL's
//   "L" conversion, ITU-R 601).
// - alpha drop: the alpha channel and tRNS transparency are discarded (no
//   compositing). alpha keep: one more channel, the PNG's alpha, or tRNS
//   transparency, or 255 where the image has neither.
// - No gamma or colour-profile correction.
// PNG has no region of interest and no DCT scaling here: the whole image is
// decoded at full resolution and DecodedRegion says so.
//
// Errors never abort or print: damaged input (bad signature, bad CRC of any
// chunk up to IEND, truncated anywhere before IEND's end, bad zlib stream) is
// kCorruptData with libspng's reason; an image over the limits, or one whose
// IDAT data is too small to hold it even at deflate's largest expansion
// (1032x: a truncated file or a decompression bomb), is kCorruptData before
// any pixel buffer is allocated. (PIL is more lenient after the image
// data: it accepts a missing IEND; we do not.)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "ops/param.h"
#include "runtime/decode/decoder.h"
#include "runtime/decode/image_buffer.h"
#include "sluice/result.h"

namespace sluice::runtime {

// Wider or taller images are refused whatever max_pixels allows.
inline constexpr int kMaxPngSide = 32768;

struct PngInfo {
  int width = 0;
  int height = 0;
  int bit_depth = 0;   // 1, 2, 4, 8 or 16
  int color_type = 0;  // PNG's: 0 gray, 2 RGB, 3 palette, 4 gray + alpha, 6 RGBA
  bool interlaced = false;
};

struct PngOptions {
  OutputColor color = OutputColor::kRGB;
  bool keep_alpha = false;
  bool exif_orientation = false;           // orientation: exif (the eXIf chunk's tag)
  int64_t max_pixels = kDefaultMaxPixels;  // width x height above this is refused
  int channels() const { return (color == OutputColor::kGray ? 1 : 3) + (keep_alpha ? 1 : 0); }
};

// True if the bytes start with the 8-byte PNG signature.
bool LooksLikePng(std::span<const uint8_t> data);

// Parses the signature and IHDR only. Errors: kCorruptData (also for sizes
// over kMaxPngSide per side or `max_pixels` in all).
Result<PngInfo> ReadPngHeader(std::span<const uint8_t> data,
                              int64_t max_pixels = kDefaultMaxPixels);

// Decodes the whole image into `out` (reused; grows only when needed; an image
// over options.max_pixels is kCorruptData before it is touched) with
// options.channels() channels, turned by the eXIf orientation when
// options.exif_orientation (as PIL's ImageOps.exif_transpose). `crop`, when
// given, must lie inside the (oriented) image (else kInvalidArgument); it is
// only reported back (crop_x ..., crop_in_buffer) since the buffer always holds
// the whole image (scale_denom 1, decoded = {0, 0, width, height}). Errors:
// kCorruptData, kInvalidArgument.
Result<DecodedRegion> DecodePng(std::span<const uint8_t> data, const PngOptions& options,
                                const std::optional<PixelRect>& crop, ImageBuffer& out);

// The `decode_png` op as a Decoder: params color (rgb | gray), alpha
// (drop | keep), max_pixels and orientation (ignore | exif; ReadHeader then gives the
// oriented size). Caps: none (whole-image decode; request.crop is only checked
// and reported, min_width / min_height are ignored).
class PngDecoder final : public Decoder {
 public:
  explicit PngDecoder(PngOptions options) : options_(options) {}
  // Errors: kInvalidArgument for a param value the op does not accept.
  static Result<std::unique_ptr<Decoder>> Create(const ParamList& params);
  static Result<PngOptions> ParseOptions(std::string_view op, const ParamList& params);

  std::string_view op_name() const override { return "decode_png"; }
  DecoderCaps caps() const override { return {}; }
  Result<ImageHeader> ReadHeader(std::span<const uint8_t> data) const override;
  Result<DecodedRegion> Decode(std::span<const uint8_t> data, const DecodeRequest& request,
                               ImageBuffer& out) const override;

 private:
  PngOptions options_;
};

}  // namespace sluice::runtime
