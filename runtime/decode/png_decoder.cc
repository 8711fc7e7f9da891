#include "runtime/decode/png_decoder.h"

#include <spng.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "runtime/decode/orientation.h"

namespace sluice::runtime {
namespace {

// Bounds for ancillary data libspng keeps (e.g. a decompressed iCCP / zTXt):
// a small file must not make it allocate much.
constexpr size_t kMaxChunkBytes = size_t{64} << 20;
constexpr size_t kMaxChunkCacheBytes = size_t{64} << 20;

struct CtxDeleter {
  void operator()(spng_ctx* ctx) const { spng_ctx_free(ctx); }
};
using Ctx = std::unique_ptr<spng_ctx, CtxDeleter>;

std::unexpected<Error> Corrupt(const char* what, int err) {
  return MakeError(ErrorCode::kCorruptData, std::string("PNG ") + what + ": " + spng_strerror(err));
}

// A context reading `data`, its IHDR parsed and checked against the limits.
Result<Ctx> Open(std::span<const uint8_t> data, int64_t max_pixels, spng_ihdr& ihdr) {
  if (!LooksLikePng(data)) {
    return MakeError(ErrorCode::kCorruptData, "PNG header: not a PNG file (bad signature)");
  }
  Ctx ctx(spng_ctx_new(0));
  if (!ctx) return MakeError(ErrorCode::kInternal, "spng_ctx_new failed");
  // libspng only reads the buffer; its API takes a non-const pointer.
  int err = spng_set_png_buffer(ctx.get(), const_cast<uint8_t*>(data.data()), data.size());
  if (err == 0) err = spng_set_image_limits(ctx.get(), kMaxPngSide, kMaxPngSide);
  if (err == 0) err = spng_set_chunk_limits(ctx.get(), kMaxChunkBytes, kMaxChunkCacheBytes);
  if (err != 0) return Corrupt("setup", err);
  err = spng_get_ihdr(ctx.get(), &ihdr);
  if (err != 0) return Corrupt("header", err);
  SLUICE_RETURN_IF_ERROR(CheckPixelLimit("PNG", ihdr.width, ihdr.height, max_pixels));
  return ctx;
}

// Deflate's largest expansion: a 258-byte match can cost 2 bits (1-bit
// length and distance codes), so a zlib stream of n bytes inflates to at most
// 1032 n bytes.
constexpr uint64_t kMaxInflateRatio = 1032;

// The IDAT payload bytes present in `data` (chunks walked from the signature
// to IEND or the end of the data; a chunk cut short counts what is there).
uint64_t IdatBytes(std::span<const uint8_t> data) {
  auto be32 = [&](size_t at) {
    return (uint32_t{data[at]} << 24) | (uint32_t{data[at + 1]} << 16) |
           (uint32_t{data[at + 2]} << 8) | uint32_t{data[at + 3]};
  };
  uint64_t total = 0;
  for (size_t at = 8; at + 8 <= data.size();) {
    const uint64_t len = be32(at);
    const uint8_t* type = data.data() + at + 4;
    if (std::memcmp(type, "IEND", 4) == 0) break;
    if (std::memcmp(type, "IDAT", 4) == 0) total += std::min<uint64_t>(len, data.size() - at - 8);
    if (len > data.size() - at - 8) break;
    at += 12 + static_cast<size_t>(len);
  }
  return total;
}

// A decompression bomb that the pixel limit lets through: a header claiming
// more pixels than its image data could hold even at deflate's largest
// expansion (a truncated file, or a small file with a large header) is
// kCorruptData before the pixel buffer is allocated. The bound is exact
// arithmetic, not a heuristic: no valid PNG fails it.
Status CheckIdatCanHoldImage(std::span<const uint8_t> data, const spng_ihdr& ihdr) {
  static constexpr int kSamples[7] = {1, 0, 3, 1, 2, 0, 4};  // per colour type
  const uint64_t bits_per_pixel =
      uint64_t{ihdr.bit_depth} * (ihdr.color_type < 7 ? kSamples[ihdr.color_type] : 1);
  // The filtered scanlines hold at least the pixels' bits, interlaced or not.
  const uint64_t least = uint64_t{ihdr.width} * ihdr.height * bits_per_pixel / 8;
  const uint64_t idat = IdatBytes(data);
  if (least <= idat * kMaxInflateRatio) return Ok();
  return MakeError(ErrorCode::kCorruptData,
                   "PNG data: " + std::to_string(idat) +
                       " bytes of image data (IDAT) cannot hold a " + std::to_string(ihdr.width) +
                       "x" + std::to_string(ihdr.height) + " image (at least " +
                       std::to_string(least) +
                       " bytes inflated; deflate expands at most 1032x): a truncated file or a "
                       "decompression bomb");
}

inline uint8_t Luma(const uint8_t* rgb) {
  return static_cast<uint8_t>((19595 * rgb[0] + 38470 * rgb[1] + 7471 * rgb[2] + 32768) >> 16);
}

// In place: n pixels of RGB(A) -> L(A). Writes never overtake reads.
void ToLumaInPlace(uint8_t* p, size_t n, bool alpha) {
  const size_t in_c = alpha ? 4 : 3, out_c = alpha ? 2 : 1;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* src = p + i * in_c;
    uint8_t* dst = p + i * out_c;
    const uint8_t l = Luma(src), a = alpha ? src[3] : 0;
    dst[0] = l;
    if (alpha) dst[1] = a;
  }
}

}  // namespace

bool LooksLikePng(std::span<const uint8_t> data) {
  static constexpr uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return data.size() >= 8 && std::memcmp(data.data(), kSignature, 8) == 0;
}

Result<PngInfo> ReadPngHeader(std::span<const uint8_t> data, int64_t max_pixels) {
  spng_ihdr ihdr{};
  auto ctx = Open(data, max_pixels, ihdr);
  if (!ctx) return std::unexpected(ctx.error());
  return PngInfo{static_cast<int>(ihdr.width), static_cast<int>(ihdr.height), ihdr.bit_depth,
                 ihdr.color_type, ihdr.interlace_method != 0};
}

Result<DecodedRegion> DecodePng(std::span<const uint8_t> data, const PngOptions& options,
                                const std::optional<PixelRect>& crop, ImageBuffer& out) {
  spng_ihdr ihdr{};
  auto ctx = Open(data, options.max_pixels, ihdr);
  if (!ctx) return std::unexpected(ctx.error());
  const int w = static_cast<int>(ihdr.width), h = static_cast<int>(ihdr.height);
  const int orientation = options.exif_orientation ? PngExifOrientation(data) : 1;
  // The output's size: turned by orientations 5..8.
  const int ow = SwapsAxes(orientation) ? h : w, oh = SwapsAxes(orientation) ? w : h;
  PixelRect c{0, 0, ow, oh};
  if (crop) {
    c = *crop;
    SLUICE_RETURN_IF_ERROR(CheckCropInside("PNG", c, ow, oh));
  }

  const bool gray_out = options.color == OutputColor::kGray;
  const bool keep = options.keep_alpha;
  // Gray PNGs of up to 8 bits decode straight to G8 / GA8; everything else
  // goes through RGB8 / RGBA8 (and then luma, in place, for gray output).
  const bool direct_gray =
      gray_out && ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8;
  int fmt = keep ? SPNG_FMT_RGBA8 : SPNG_FMT_RGB8;
  int channels = keep ? 4 : 3;
  if (direct_gray) {
    fmt = keep ? SPNG_FMT_GA8 : SPNG_FMT_G8;
    channels = keep ? 2 : 1;
  }
  const int flags = keep ? SPNG_DECODE_TRNS : 0;
  SLUICE_RETURN_IF_ERROR(CheckIdatCanHoldImage(data, ihdr));
  size_t len = 0;
  int err = spng_decoded_image_size(ctx->get(), fmt, &len);
  if (err != 0) return Corrupt("decode", err);
  // A turned image is decoded into a per-thread buffer (reused: no allocation
  // per sample once it has grown) and turned from there into `out`.
  thread_local ImageBuffer stored;
  ImageBuffer& dst = orientation != 1 ? stored : out;
  dst.Reset(w, h, channels);
  if (len != dst.size_bytes()) {
    return MakeError(ErrorCode::kInternal, "PNG decode: libspng wants " + std::to_string(len) +
                                               " bytes for a " + std::to_string(w) + "x" +
                                               std::to_string(h) + "x" + std::to_string(channels) +
                                               " image");
  }
  err = spng_decode_image(ctx->get(), dst.data(), len, fmt, flags);
  if (err != 0) return Corrupt("decode", err);
  // The rest of the file up to IEND: libspng stops reading once the pixels are
  // complete, so a file cut inside the last IDAT's CRC or before IEND, or a
  // damaged chunk after the image data, is only caught here.
  err = spng_decode_chunks(ctx->get());
  if (err != 0) return Corrupt("trailer", err);
  if (gray_out && !direct_gray) {
    ToLumaInPlace(dst.data(), static_cast<size_t>(w) * h, keep);
    dst.Reset(w, h, keep ? 2 : 1);  // smaller: keeps the converted bytes
  }
  if (orientation != 1) ApplyOrientation(orientation, stored, out);

  DecodedRegion region;
  region.scale_denom = 1;
  region.scaled_width = ow;
  region.scaled_height = oh;
  region.decoded = PixelRect{0, 0, ow, oh};
  region.crop_x = c.x;
  region.crop_y = c.y;
  region.crop_width = c.width;
  region.crop_height = c.height;
  region.crop_in_buffer = c;
  return region;
}

// ---- PngDecoder: the decode_png op -------------------------------------------

Result<PngOptions> PngDecoder::ParseOptions(std::string_view op, const ParamList& params) {
  auto color = DecoderColorParam(params, op);
  if (!color) return std::unexpected(color.error());
  auto alpha = DecoderEnumParam(params, op, "alpha", "drop", {"drop", "keep"});
  if (!alpha) return std::unexpected(alpha.error());
  auto orientation = DecoderEnumParam(params, op, "orientation", "ignore", {"ignore", "exif"});
  if (!orientation) return std::unexpected(orientation.error());
  auto max_pixels = DecoderMaxPixelsParam(params, op);
  if (!max_pixels) return std::unexpected(max_pixels.error());
  return PngOptions{.color = *color,
                    .keep_alpha = *alpha == "keep",
                    .exif_orientation = *orientation == "exif",
                    .max_pixels = *max_pixels};
}

Result<std::unique_ptr<Decoder>> PngDecoder::Create(const ParamList& params) {
  return CreateDecoder<PngDecoder>("decode_png", params);
}

Result<ImageHeader> PngDecoder::ReadHeader(std::span<const uint8_t> data) const {
  auto info = ReadPngHeader(data, options_.max_pixels);
  if (!info) return std::unexpected(info.error());
  ImageHeader header{info->width, info->height, options_.channels()};
  if (options_.exif_orientation && SwapsAxes(PngExifOrientation(data))) {
    std::swap(header.width, header.height);
  }
  return header;
}

Result<DecodedRegion> PngDecoder::Decode(std::span<const uint8_t> data,
                                         const DecodeRequest& request, ImageBuffer& out) const {
  return DecodePng(data, options_, request.crop, out);
}

}  // namespace sluice::runtime
