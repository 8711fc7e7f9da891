// MakeDecoder: the decode op name -> Decoder table.
//
// Adding a decoder: write its class (one file pair under runtime/decode/, with
// a static Create(const ParamList&)), then add its header and one row to
// kDecoders below. The op itself (params, type rule, reference) lives in
// ops/decode_ops.cc.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "runtime/decode/decoder.h"
#include "runtime/decode/image_decoder.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/decode/png_decoder.h"

namespace sluice::runtime {
namespace {

struct DecoderEntry {
  std::string_view op;
  Result<std::unique_ptr<Decoder>> (*create)(const ParamList& params);
};

constexpr auto kDecoders = std::to_array<DecoderEntry>({
    {"decode_jpeg", &JpegDecoder::Create},
    {"decode_png", &PngDecoder::Create},
    {"decode_image", &ImageDecoder::Create},
});

std::string JoinNames() {
  std::string names;
  for (const DecoderEntry& e : kDecoders) {
    if (!names.empty()) names += ", ";
    names += e.op;
  }
  return names;
}

}  // namespace

Result<std::unique_ptr<Decoder>> MakeDecoder(std::string_view op, const ParamList& params) {
  for (const DecoderEntry& e : kDecoders) {
    if (e.op == op) return e.create(params);
  }
  return MakeError(ErrorCode::kUnsupported,
                   "no decoder for op `" + std::string(op) + "`; this build has: " + JoinNames());
}

std::vector<std::string_view> DecoderNames() {
  std::vector<std::string_view> names;
  for (const DecoderEntry& e : kDecoders) names.push_back(e.op);
  return names;
}

Result<std::string> DecoderEnumParam(const ParamList& params, std::string_view op,
                                     const std::string& name, std::string_view fallback,
                                     std::initializer_list<std::string_view> choices) {
  const ParamValue* v = FindParam(params, name);
  if (v == nullptr) return std::string(fallback);
  const std::string* s = std::get_if<std::string>(&v->value);
  if (s != nullptr && std::find(choices.begin(), choices.end(), *s) != choices.end()) return *s;
  std::string allowed;
  for (std::string_view c : choices) {
    if (!allowed.empty()) allowed += " | ";
    allowed += c;
  }
  return MakeError(ErrorCode::kInvalidArgument, std::string(op) + ": param `" + name + "` is " +
                                                    v->ToString() + ", expected " + allowed);
}

Result<OutputColor> DecoderColorParam(const ParamList& params, std::string_view op) {
  auto color = DecoderEnumParam(params, op, "color", "rgb", {"rgb", "gray"});
  if (!color) return std::unexpected(color.error());
  return *color == "gray" ? OutputColor::kGray : OutputColor::kRGB;
}

Result<int64_t> DecoderMaxPixelsParam(const ParamList& params, std::string_view op) {
  const ParamValue* v = FindParam(params, "max_pixels");
  if (v == nullptr) return kDefaultMaxPixels;
  const int64_t* n = std::get_if<int64_t>(&v->value);
  if (n != nullptr && *n > 0) return *n;
  return MakeError(ErrorCode::kInvalidArgument, std::string(op) + ": param `max_pixels` is " +
                                                    v->ToString() +
                                                    ", expected a positive integer");
}

Status CheckPixelLimit(std::string_view format, int64_t width, int64_t height, int64_t max_pixels) {
  if (width * height <= max_pixels) return Ok();
  return MakeError(ErrorCode::kCorruptData,
                   std::string(format) + " header: image " + std::to_string(width) + "x" +
                       std::to_string(height) + " (" + std::to_string(width * height) +
                       " pixels) exceeds the pixel limit max_pixels=" + std::to_string(max_pixels) +
                       " (a decompression bomb, or raise the decode op's max_pixels)");
}

Status CheckCropInside(std::string_view format, const PixelRect& crop, int width, int height,
                       int exif_orientation) {
  const PixelRect& c = crop;
  if (c.width > 0 && c.height > 0 && c.x >= 0 && c.y >= 0 && int64_t{c.x} + c.width <= width &&
      int64_t{c.y} + c.height <= height) {
    return Ok();
  }
  std::string message = std::string(format) + " decode: crop (x=" + std::to_string(c.x) +
                        " y=" + std::to_string(c.y) + " w=" + std::to_string(c.width) +
                        " h=" + std::to_string(c.height) + ") is not inside the " +
                        std::to_string(width) + "x" + std::to_string(height) + " image";
  if (exif_orientation != 0) {
    message += " (EXIF orientation " + std::to_string(exif_orientation) + ")";
  }
  return MakeError(ErrorCode::kInvalidArgument, message);
}

}  // namespace sluice::runtime
