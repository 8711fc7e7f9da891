// The decoder interface: encoded bytes of one sample -> a uint8 HWC image.
//
// Decoders are a registry keyed by the plan's decode op names (decode_jpeg,
// decode_png, decode_image, ...): the loader asks MakeDecoder for the plan's
// decode step and never names a format itself. A new decoder is one file
// (a class implementing Decoder) plus one line in decoder_registry.cc.
//
// Pushdown: a decoder declares what it can do with a request (DecoderCaps).
// A decoder that cannot decode a region of interest or scale in the DCT domain
// ignores `crop` / `min_width` / `min_height` and decodes the whole image at
// full resolution; DecodedRegion always says exactly what the buffer holds, so
// the caller maps the crop the same way in every case.
//
// Errors never abort, exit or print: damaged input is kCorruptData with the
// library's reason; an image over the pixel limit (the op's `max_pixels`,
// default kDefaultMaxPixels, checked from the header by ReadHeader and Decode)
// is kCorruptData before any pixel buffer is allocated, so a decompression
// bomb (a small file whose header claims 30000x30000) is one bad sample.
//
// Thread safety: a Decoder is immutable after MakeDecoder; Decode and
// ReadHeader may be called concurrently from any number of threads (each call
// uses only its arguments and its own library state).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/param.h"
#include "runtime/decode/image_buffer.h"
#include "sluice/result.h"

namespace sluice::runtime {

// A rectangle of pixels: columns [x, x + width), rows [y, y + height).
struct PixelRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
  bool operator==(const PixelRect&) const = default;
};

enum class OutputColor { kRGB, kGray };

// The decode ops' `max_pixels` default: width x height (before any scaling)
// above this is refused from the header. 100 MP fits every common camera
// image; a 100 MP RGB decode needs 300 MB.
inline constexpr int64_t kDefaultMaxPixels = 100'000'000;

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
  // The pixel limit of the free DecodeJpeg (see kDefaultMaxPixels); a Decoder
  // uses its op's `max_pixels` param instead.
  int64_t max_pixels = kDefaultMaxPixels;
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

// What a decoder can push down into the decode itself.
struct DecoderCaps {
  bool region_of_interest = false;  // honours DecodeRequest::crop (decodes less)
  bool dct_scaling = false;         // honours min_width / min_height (1/2, 1/4, 1/8)
};

// An image's size as the decoder would output it (after any orientation
// transform), from its headers only.
struct ImageHeader {
  int width = 0;
  int height = 0;
  int channels = 0;  // of the decoded output (e.g. 3 for color: rgb)
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // The decode op this decoder implements (as in plan.json).
  virtual std::string_view op_name() const = 0;
  virtual DecoderCaps caps() const = 0;
  // Parses the headers only. Errors: kCorruptData.
  virtual Result<ImageHeader> ReadHeader(std::span<const uint8_t> data) const = 0;
  // Decodes `data` into `out` (reused; grows only when needed). The request's
  // crop is in output (oriented) coordinates. `request.color` is ignored: the
  // op's own `color` parameter, bound at MakeDecoder, decides. Errors:
  // kCorruptData, kInvalidArgument (crop outside the image or empty).
  virtual Result<DecodedRegion> Decode(std::span<const uint8_t> data, const DecodeRequest& request,
                                       ImageBuffer& out) const = 0;
};

// The decoder for the plan's decode step `op` with its params (defaults
// filled). Errors: kUnsupported naming the op and the decoders this build has.
Result<std::unique_ptr<Decoder>> MakeDecoder(std::string_view op, const ParamList& params);

// The decode op names MakeDecoder knows, in registry order.
std::vector<std::string_view> DecoderNames();

// For decoder factories: the value of the enum parameter `name` of `op`, or
// `fallback` when `params` lacks it. Errors: kInvalidArgument when the value
// is not a string among `choices`.
Result<std::string> DecoderEnumParam(const ParamList& params, std::string_view op,
                                     const std::string& name, std::string_view fallback,
                                     std::initializer_list<std::string_view> choices);

// The decode ops' shared `color` param (rgb | gray, default rgb).
Result<OutputColor> DecoderColorParam(const ParamList& params, std::string_view op);

// The decode ops' `max_pixels` param (default kDefaultMaxPixels). Errors:
// kInvalidArgument for a value that is not a positive integer.
Result<int64_t> DecoderMaxPixelsParam(const ParamList& params, std::string_view op);

// For decoders: OK when a `width` x `height` image (as the header says) has at
// most `max_pixels` pixels. Errors: kCorruptData "<format> header: image WxH
// (N pixels) exceeds the pixel limit max_pixels=M ...".
Status CheckPixelLimit(std::string_view format, int64_t width, int64_t height, int64_t max_pixels);

// For decoders: OK when `crop` has positive size and lies inside a `width` x
// `height` image. Errors: kInvalidArgument "<format> decode: crop (...) is not
// inside the WxH image", ending " (EXIF orientation N)" when
// `exif_orientation` is not 0.
Status CheckCropInside(std::string_view format, const PixelRect& crop, int width, int height,
                       int exif_orientation = 0);

// For decoder factories: a D built from D::ParseOptions(op, params).
template <typename D>
Result<std::unique_ptr<Decoder>> CreateDecoder(std::string_view op, const ParamList& params) {
  auto options = D::ParseOptions(op, params);
  if (!options) return std::unexpected(options.error());
  return std::unique_ptr<Decoder>(new D(*options));
}

}  // namespace sluice::runtime
