// Decode ops: encoded bytes -> uint8 HWC image.
//
// decode_jpeg's reference implementation uses libjpeg-turbo's TurboJPEG API.
// Colour handling: with color: rgb, grayscale JPEGs are expanded to three equal
// channels and CMYK/YCCK JPEGs (stored inverted, as Adobe writes them and as
// libjpeg-turbo's own CMYK code assumes) are converted with R = C*K/255 (likewise
// G, B), rounded; with color: gray, colour JPEGs become ITU-R 601 luma (libjpeg's
// own conversion; CMYK goes through RGB first). Corrupt or truncated data is
// ErrorCode::kCorruptData with libjpeg-turbo's reason; warnings other than a
// premature end of data (e.g. extraneous bytes before a marker) are tolerated,
// as PIL does. `orientation: exif` turns the decoded image by the EXIF
// orientation tag (ops/exif_orientation.h) as PIL's ImageOps.exif_transpose
// does; the default `ignore` keeps the stored pixels, which is what
// torchvision's ImageFolder (PIL's Image.open + convert) returns.
//
// decode_png's reference implementation decodes with libspng to 16-bit RGBA
// (every PNG format converts to it) and then keeps the high byte, takes luma
// (PIL's "L" conversion, (19595 R + 38470 G + 7471 B + 32768) >> 16) for
// color: gray and drops or keeps alpha; the runtime decoder
// (runtime/decode/png_decoder.h) takes libspng's 8-bit paths instead, so the
// two cross-check; `orientation: exif` reads the eXIf chunk's tag. decode_image
// dispatches on the file's magic bytes.
#include <spng.h>
#include <turbojpeg.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "ops/exif_orientation.h"
#include "ops/families.h"

namespace sluice {
namespace {

using namespace ops_internal;

// The decode ops' default `max_pixels` (runtime/decode/decoder.h has the same
// constant for the runtime decoders; tests/runtime/decode/decoder_registry_test.cc
// checks they agree).
constexpr int64_t kDefaultMaxPixels = 100'000'000;

int64_t OutputChannels(const ParamList& params) {
  const ParamValue* alpha = FindParam(params, "alpha");
  return (P(params, "color").AsString() == "gray" ? 1 : 3) +
         (alpha != nullptr && alpha->AsString() == "keep" ? 1 : 0);
}

// One type rule for every decode op: encoded bytes in, uint8 HWC out with
// channels from `color` (rgb 3, gray 1) plus one with `alpha: keep`.
auto InferDecode(const char* op) {
  return [op](std::span<const TensorType> inputs,
              const ParamList& params) -> Result<std::vector<TensorType>> {
    SLUICE_RETURN_IF_ERROR(ExpectNumInputs(op, inputs, 1));
    const TensorType& t = inputs[0];
    if (!t.encoded()) {
      return MakeError(ErrorCode::kInvalidSpec,
                       "`" + std::string(op) + "` expects encoded bytes, got " + t.ToString(),
                       std::string(op) +
                           " reads a source's `jpg` tensor; remove it if the image "
                           "is already decoded");
    }
    return std::vector<TensorType>{
        Image(DType::kUInt8, Layout::kHWC, kDynamic, kDynamic, OutputChannels(params))};
  };
}

Status ExpectEncoded(const char* op, const RefTensor& in) {
  if (in.type.encoded()) return Ok();
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string(op) + " expects encoded bytes, got " + in.type.ToString());
}

// `in` turned by EXIF orientation `o` (1..8) as PIL's exif_transpose does.
RefTensor Orient(const RefTensor& in, int o) {
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  const bool swap = SwapsAxes(o);
  const int64_t oh = swap ? w : h, ow = swap ? h : w;
  RefTensor out = RefTensor::Zeros(in.type.dtype, Layout::kHWC, {oh, ow, c});
  for (int64_t y = 0; y < oh; ++y)
    for (int64_t x = 0; x < ow; ++x) {
      int64_t sy = y, sx = x;  // the stored pixel shown at (y, x)
      switch (o) {
        case 2:
          sx = w - 1 - x;
          break;  // mirror left-right
        case 3:
          sx = w - 1 - x, sy = h - 1 - y;
          break;  // rotate 180
        case 4:
          sy = h - 1 - y;
          break;  // mirror top-bottom
        case 5:
          sx = y, sy = x;
          break;  // transpose
        case 6:
          sx = y, sy = h - 1 - x;
          break;  // rotate 90 clockwise
        case 7:
          sx = w - 1 - y, sy = h - 1 - x;
          break;  // transverse
        case 8:
          sx = w - 1 - y, sy = x;
          break;  // rotate 90 counter-clockwise
        default:
          break;
      }
      for (int64_t k = 0; k < c; ++k) out.at(y, x, k) = in.at(sy, sx, k);
    }
  return out;
}

// An opaque alpha channel appended to `in`.
RefTensor WithOpaqueAlpha(const RefTensor& in) {
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  RefTensor out = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {h, w, c + 1});
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t k = 0; k < c; ++k) out.at(y, x, k) = in.at(y, x, k);
      out.at(y, x, c) = 255;
    }
  return out;
}

// The op's pixel limit (`max_pixels`): a width x height header over it is
// kCorruptData before any pixel buffer is allocated.
Status CheckMaxPixels(const char* format, int64_t w, int64_t h, const ParamList& params) {
  const ParamValue* limit = FindParam(params, "max_pixels");
  const int64_t max = limit != nullptr ? limit->AsInt() : kDefaultMaxPixels;
  if (w * h <= max) return Ok();
  return MakeError(ErrorCode::kCorruptData,
                   std::string(format) + " image " + std::to_string(w) + "x" + std::to_string(h) +
                       " exceeds the pixel limit max_pixels=" + std::to_string(max));
}

// A unique_ptr deleter that calls `Free`.
template <auto Free>
struct FreeWith {
  void operator()(auto* p) const { Free(p); }
};

// `out` turned by the EXIF orientation `exif_orientation(bytes)` reads when
// the op's `orientation` param is "exif"; `out` as is otherwise.
RefTensor OrientIfExif(RefTensor out, const ParamList& params, const std::vector<uint8_t>& bytes,
                       int (*exif_orientation)(std::span<const uint8_t>)) {
  const ParamValue* orientation = FindParam(params, "orientation");
  if (orientation == nullptr || orientation->AsString() != "exif") return out;
  const int o = exif_orientation(bytes);
  return o != 1 ? Orient(out, o) : out;
}

Result<RefTensor> DecodeJpegReference(const RefTensor& in, const ParamList& params, RefContext&) {
  SLUICE_RETURN_IF_ERROR(ExpectEncoded("decode_jpeg", in));
  const bool gray = P(params, "color").AsString() == "gray";
  std::unique_ptr<void, FreeWith<tjDestroy>> tj(tjInitDecompress());
  if (!tj) return MakeError(ErrorCode::kInternal, "tjInitDecompress failed");
  auto* buf = const_cast<unsigned char*>(in.bytes.data());
  const auto size = static_cast<unsigned long>(in.bytes.size());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (in.bytes.empty() ||
      tjDecompressHeader3(tj.get(), buf, size, &width, &height, &subsamp, &colorspace) != 0) {
    return MakeError(ErrorCode::kCorruptData,
                     std::string("not a readable JPEG: ") +
                         (in.bytes.empty() ? "empty input" : tjGetErrorStr2(tj.get())));
  }
  SLUICE_RETURN_IF_ERROR(CheckMaxPixels("JPEG", width, height, params));
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  const int pixel_format = cmyk ? TJPF_CMYK : gray ? TJPF_GRAY : TJPF_RGB;
  const int src_channels = tjPixelSize[pixel_format];
  std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * src_channels);
  if (tjDecompress2(tj.get(), buf, size, pixels.data(), width, 0, height, pixel_format,
                    TJFLAG_ACCURATEDCT) != 0) {
    const std::string reason = tjGetErrorStr2(tj.get());
    if (tjGetErrorCode(tj.get()) == TJERR_FATAL ||
        reason.find("Premature end") != std::string::npos) {
      return MakeError(ErrorCode::kCorruptData, "corrupt JPEG: " + reason);
    }
  }
  const int64_t out_channels = gray ? 1 : 3;
  RefTensor out = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {height, width, out_channels});
  for (int64_t i = 0; i < static_cast<int64_t>(width) * height; ++i) {
    const unsigned char* px = &pixels[static_cast<size_t>(i) * src_channels];
    if (cmyk) {
      float rgb[3];
      for (int c = 0; c < 3; ++c) rgb[c] = std::nearbyint(px[c] * px[3] / 255.0f);
      if (gray) {
        out.data[i] =
            RoundToDType(0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2], DType::kUInt8);
      } else {
        for (int c = 0; c < 3; ++c) out.data[i * 3 + c] = rgb[c];
      }
    } else {
      for (int c = 0; c < out_channels; ++c) out.data[i * out_channels + c] = px[c];
    }
  }
  return OrientIfExif(std::move(out), params, in.bytes, JpegExifOrientation);
}

Result<RefTensor> DecodePngReference(const RefTensor& in, const ParamList& params, RefContext&) {
  SLUICE_RETURN_IF_ERROR(ExpectEncoded("decode_png", in));
  const bool gray = P(params, "color").AsString() == "gray";
  const bool keep = P(params, "alpha").AsString() == "keep";
  std::unique_ptr<spng_ctx, FreeWith<spng_ctx_free>> ctx(spng_ctx_new(0));
  if (!ctx) return MakeError(ErrorCode::kInternal, "spng_ctx_new failed");
  auto corrupt = [](int err) {
    return MakeError(ErrorCode::kCorruptData, std::string("corrupt PNG: ") + spng_strerror(err));
  };
  int err = spng_set_png_buffer(ctx.get(), const_cast<uint8_t*>(in.bytes.data()), in.bytes.size());
  if (err == 0) err = spng_set_image_limits(ctx.get(), 32768, 32768);
  spng_ihdr ihdr{};
  if (err == 0) err = spng_get_ihdr(ctx.get(), &ihdr);
  if (err != 0) return corrupt(err);
  const int64_t h = ihdr.height, w = ihdr.width;
  SLUICE_RETURN_IF_ERROR(CheckMaxPixels("PNG", w, h, params));
  std::vector<uint16_t> rgba(static_cast<size_t>(w * h * 4));
  err = spng_decode_image(ctx.get(), rgba.data(), rgba.size() * 2, SPNG_FMT_RGBA16,
                          keep ? SPNG_DECODE_TRNS : 0);
  if (err == 0) err = spng_decode_chunks(ctx.get());  // the rest, up to IEND
  if (err != 0) return corrupt(err);
  const int64_t c = OutputChannels(params);
  RefTensor out = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {h, w, c});
  for (int64_t i = 0; i < w * h; ++i) {
    const uint16_t* px = &rgba[static_cast<size_t>(i) * 4];
    const int r = px[0] >> 8, g = px[1] >> 8, b = px[2] >> 8, a = px[3] >> 8;
    float* dst = &out.data[static_cast<size_t>(i * c)];
    if (gray) {
      dst[0] = static_cast<float>((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
    } else {
      dst[0] = r, dst[1] = g, dst[2] = b;
    }
    if (keep) dst[c - 1] = a;
  }
  return OrientIfExif(std::move(out), params, in.bytes, PngExifOrientation);
}

Result<RefTensor> DecodeImageReference(const RefTensor& in, const ParamList& params,
                                       RefContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ExpectEncoded("decode_image", in));
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  const std::vector<uint8_t>& b = in.bytes;
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) {
    return DecodePngReference(in, params, ctx);
  }
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) {
    auto out = DecodeJpegReference(in, params, ctx);
    if (out && P(params, "alpha").AsString() == "keep") return WithOpaqueAlpha(*out);
    return out;
  }
  return MakeError(ErrorCode::kCorruptData, "decode_image: neither a JPEG nor a PNG file");
}

ParamDef ColorParam(const char* what) {
  return ParamDef{.name = "color",
                  .type = ParamType::kEnum,
                  .doc = std::string("Output colour: rgb (3 channels; ") + what +
                         " are converted) or gray (1 channel, ITU-R 601 luma).",
                  .default_value = VStr("rgb"),
                  .choices = {"rgb", "gray"}};
}

ParamDef OrientationParam(const char* applies_to) {
  return ParamDef{
      .name = "orientation",
      .type = ParamType::kEnum,
      .doc = std::string("EXIF orientation") + applies_to +
             ": ignore (default; the stored pixels, as torchvision's ImageFolder returns them) "
             "or exif (turn and mirror by the EXIF orientation tag, as PIL's "
             "ImageOps.exif_transpose does; tags 5-8 swap width and height).",
      .default_value = VStr("ignore"),
      .choices = {"ignore", "exif"}};
}

ParamDef MaxPixelsParam() {
  return ParamDef{.name = "max_pixels",
                  .type = ParamType::kInt,
                  .doc =
                      "Pixel limit: an image whose header claims more than this many pixels "
                      "(width x height) is a bad sample, refused before any pixel buffer "
                      "is allocated (a decompression bomb cannot exhaust memory). Default "
                      "100 MP.",
                  .default_value = VInt(kDefaultMaxPixels),
                  .min = 1,
                  .max = static_cast<double>(int64_t{32768} * 32768)};
}

ParamDef AlphaParam(const char* jpeg_note) {
  return ParamDef{.name = "alpha",
                  .type = ParamType::kEnum,
                  .doc = std::string("Alpha channel: drop (default; alpha and tRNS "
                                     "transparency are discarded, not composited) or keep (one "
                                     "more channel: the PNG's alpha or tRNS transparency, 255 "
                                     "where it has none") +
                         jpeg_note + ").",
                  .default_value = VStr("drop"),
                  .choices = {"drop", "keep"}};
}

// A decode op: bytes in, a uint8 HWC image out, its type rule InferDecode.
OpDef DecodeOp(const char* name, std::string doc, std::vector<ParamDef> params,
               Result<RefTensor> (*reference)(const RefTensor&, const ParamList&, RefContext&)) {
  return OpDef{
      .name = name,
      .op_class = OpClass::kDecode,
      .doc = std::move(doc),
      .params = std::move(params),
      .infer = InferDecode(name),
      .reference = reference,
  };
}

}  // namespace

void RegisterDecodeOps(std::vector<OpDef>& ops) {
  ops.push_back(
      DecodeOp("decode_jpeg",
               "Decodes a JPEG file's bytes into a uint8 HWC image; corrupt data is a per-sample "
               "error handled by output.on_error. The EXIF orientation tag is ignored unless "
               "`orientation: exif` is set, so by default results match torchvision's ImageFolder "
               "(PIL's Image.open does not apply it either).",
               {ColorParam("grayscale and CMYK JPEGs"), OrientationParam(""), MaxPixelsParam()},
               DecodeJpegReference));
  ops.push_back(
      DecodeOp("decode_png",
               "Decodes a PNG file's bytes (any bit depth, gray, palette, alpha, interlaced) into "
               "a uint8 HWC image; 16-bit samples keep their high byte. Always decodes the whole "
               "image (no region-of-interest or DCT-scaled pushdown). Corrupt data (bad CRC, "
               "truncated, garbage) is a per-sample error handled by output.on_error.",
               {ColorParam("gray and palette PNGs"), AlphaParam(""),
                OrientationParam(" (of the eXIf chunk)"), MaxPixelsParam()},
               DecodePngReference));
  ops.push_back(DecodeOp(
      "decode_image",
      "Decodes a JPEG or PNG file, chosen per file by its magic bytes (so a folder may "
      "mix both), into a uint8 HWC image, as decode_jpeg or decode_png would. Other "
      "formats are a per-sample error handled by output.on_error.",
      {ColorParam("gray, palette and CMYK images"),
       AlphaParam("; JPEGs get an opaque alpha channel"),
       OrientationParam(" (a JPEG's Exif segment or a PNG's eXIf chunk)"), MaxPixelsParam()},
      DecodeImageReference));
}

}  // namespace sluice
