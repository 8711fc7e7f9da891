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
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "ops/param.h"
#include "runtime/decode/decoder.h"
#include "runtime/decode/image_buffer.h"
#include "sluice/result.h"

namespace sluice::runtime {

// Images wider or taller than this are rejected as corrupt before any pixel
// buffer is allocated, whatever max_pixels allows (DecodeRequest::max_pixels
// bounds their area).
inline constexpr int kMaxJpegSide = 32768;

enum class JpegColorSpace { kUnknown, kGray, kYCbCr, kRGB, kCMYK, kYCCK };

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;  // in the file: 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
  JpegColorSpace colorspace = JpegColorSpace::kUnknown;
  bool progressive = false;
};

// Parses the headers only (no pixel decode). Errors: kCorruptData.
Result<JpegInfo> ReadJpegHeader(std::span<const uint8_t> data);

// Decodes `data` into `out` (reused; it grows only when needed) as described
// above. Errors: kCorruptData (not a JPEG, truncated, damaged, over
// kMaxJpegSide or request.max_pixels, unsupported colour space), kInvalidArgument (crop outside the
// image or empty).
Result<DecodedRegion> DecodeJpeg(std::span<const uint8_t> data, const DecodeRequest& request,
                                 ImageBuffer& out);

// DecodeJpeg on the bytes as they are, without cutting a file with restart
// intervals down to the tiles the crop needs (jpeg_restart_splice.h):
// DecodeJpeg's reference, for its tests and fuzz harnesses.
Result<DecodedRegion> DecodeJpegUnspliced(std::span<const uint8_t> data,
                                          const DecodeRequest& request, ImageBuffer& out);

// True if the bytes start with a JPEG SOI marker followed by another marker.
bool LooksLikeJpeg(std::span<const uint8_t> data);

// The `decode_jpeg` op as a Decoder: DecodeJpeg / ReadJpegHeader with the op's
// params: `color` (rgb -> 3 channels, gray -> 1) overrides request.color;
// `max_pixels` bounds width x height (ReadHeader and Decode are kCorruptData
// above it, before any allocation);
// `orientation: exif` applies the EXIF orientation tag (ops/exif_orientation.h)
// so the output matches PIL's ImageOps.exif_transpose. Then ReadHeader gives
// the oriented size, a request's crop and min_width / min_height are in
// oriented coordinates (mapped to stored ones, so ROI and DCT scaling still
// apply), and the DecodedRegion describes the oriented buffer. Caps: region of
// interest and DCT scaling.
class JpegDecoder final : public Decoder {
 public:
  struct Options {
    OutputColor color = OutputColor::kRGB;
    bool exif_orientation = false;           // orientation: exif
    int64_t max_pixels = kDefaultMaxPixels;  // ReadHeader and Decode refuse more
  };
  explicit JpegDecoder(Options options) : options_(options) {}
  // From the op's params (missing ones take the op's defaults). Errors:
  // kInvalidArgument for a value the op does not accept.
  static Result<std::unique_ptr<Decoder>> Create(const ParamList& params);
  static Result<Options> ParseOptions(std::string_view op, const ParamList& params);

  std::string_view op_name() const override { return "decode_jpeg"; }
  DecoderCaps caps() const override { return {.region_of_interest = true, .dct_scaling = true}; }
  Result<ImageHeader> ReadHeader(std::span<const uint8_t> data) const override;
  Result<DecodedRegion> Decode(std::span<const uint8_t> data, const DecodeRequest& request,
                               ImageBuffer& out) const override;

 private:
  Options options_;
};

}  // namespace sluice::runtime
