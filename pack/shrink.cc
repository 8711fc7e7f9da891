#include "pack/shrink.h"

#include <spng.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "ops/reference/ref_tensor.h"
#include "ops/reference/resample.h"
#include "ops/registry.h"
#include "runtime/decode/decoder.h"

namespace sluice::runtime {
namespace {

// The decode_image decoder with its defaults (EXIF orientation applied, RGB,
// the default max_pixels), made once; null if this build lacks it.
const Decoder* ImageDecoderWithDefaults() {
  static const std::unique_ptr<Decoder> decoder = []() -> std::unique_ptr<Decoder> {
    const OpDef* op = FindOp("decode_image");
    if (op == nullptr) return nullptr;
    auto made = MakeDecoder("decode_image", WithDefaults(op->params, {}));
    return made ? std::move(*made) : nullptr;
  }();
  return decoder.get();
}

// Longer side -> max_side, the shorter scaled to match (rounded, at least 1).
std::pair<int, int> TargetSize(int width, int height, int max_side) {
  const double scale = static_cast<double>(max_side) / std::max(width, height);
  const int w = std::max(1, static_cast<int>(std::lround(width * scale)));
  const int h = std::max(1, static_cast<int>(std::lround(height * scale)));
  return {w, h};
}

Status EncodeJpeg(const std::vector<uint8_t>& rgb, int w, int h, int quality,
                  std::vector<uint8_t>& out) {
  tjhandle tj = tjInitCompress();
  if (tj == nullptr) return MakeError(ErrorCode::kIo, "cannot start the JPEG encoder");
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, rgb.data(), w, 0, h, TJPF_RGB, &jpeg, &size, TJSAMP_420, quality,
                             TJFLAG_ACCURATEDCT);
  Status status;
  if (rc != 0) {
    status = MakeError(ErrorCode::kIo, std::string("JPEG encode failed: ") + tjGetErrorStr2(tj));
  } else {
    out.assign(jpeg, jpeg + size);
  }
  tjFree(jpeg);
  tjDestroy(tj);
  return status;
}

Status EncodePng(const std::vector<uint8_t>& rgb, int w, int h, std::vector<uint8_t>& out) {
  std::unique_ptr<spng_ctx, void (*)(spng_ctx*)> ctx(spng_ctx_new(SPNG_CTX_ENCODER), spng_ctx_free);
  if (!ctx) return MakeError(ErrorCode::kIo, "cannot start the PNG encoder");
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(w);
  ihdr.height = static_cast<uint32_t>(h);
  ihdr.bit_depth = 8;
  ihdr.color_type = SPNG_COLOR_TYPE_TRUECOLOR;
  spng_set_ihdr(ctx.get(), &ihdr);
  int rc = spng_encode_image(ctx.get(), rgb.data(), rgb.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  if (rc != 0) {
    return MakeError(ErrorCode::kIo, std::string("PNG encode failed: ") + spng_strerror(rc));
  }
  size_t size = 0;
  int error = 0;
  void* png = spng_get_png_buffer(ctx.get(), &size, &error);
  if (png == nullptr) {
    return MakeError(ErrorCode::kIo, std::string("PNG encode failed: ") + spng_strerror(error));
  }
  const uint8_t* bytes = static_cast<const uint8_t*>(png);
  out.assign(bytes, bytes + size);
  free(png);  // spng_get_png_buffer hands over a malloc'd buffer
  return {};
}

}  // namespace

std::vector<uint8_t> ResizeRgb8(const uint8_t* rgb, int width, int height, size_t stride, int out_w,
                                int out_h) {
  constexpr int kC = 3;
  const auto xtaps = ref::ResampleTaps(width, out_w, ref::Filter::kBilinear, /*antialias=*/true);
  const auto ytaps = ref::ResampleTaps(height, out_h, ref::Filter::kBilinear, /*antialias=*/true);
  // Horizontal pass into [height][out_w][3] doubles; each sum runs over the
  // taps in ascending order from 0, as the reference's does.
  const size_t tmp_row = static_cast<size_t>(out_w) * kC;
  std::vector<double> tmp(static_cast<size_t>(height) * tmp_row);
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = rgb + static_cast<size_t>(y) * stride;
    double* dst = tmp.data() + static_cast<size_t>(y) * tmp_row;
    for (int x = 0; x < out_w; ++x) {
      const ref::Taps& t = xtaps[static_cast<size_t>(x)];
      const uint8_t* p = row + static_cast<size_t>(t.first) * kC;
      double r = 0.0, g = 0.0, b = 0.0;
      for (size_t k = 0; k < t.weights.size(); ++k, p += kC) {
        const double w = t.weights[k];
        r += w * p[0];
        g += w * p[1];
        b += w * p[2];
      }
      dst[x * kC + 0] = r;
      dst[x * kC + 1] = g;
      dst[x * kC + 2] = b;
    }
  }
  // Vertical pass: a whole output row at a time (taps outer, elements inner,
  // so every element still sums its taps in ascending order).
  std::vector<uint8_t> out(static_cast<size_t>(out_h) * tmp_row);
  std::vector<double> acc(tmp_row);
  for (int y = 0; y < out_h; ++y) {
    const ref::Taps& t = ytaps[static_cast<size_t>(y)];
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t k = 0; k < t.weights.size(); ++k) {
      const double w = t.weights[k];
      const double* src =
          tmp.data() + static_cast<size_t>(t.first + static_cast<int64_t>(k)) * tmp_row;
      for (size_t i = 0; i < tmp_row; ++i) acc[i] += w * src[i];
    }
    uint8_t* dst = out.data() + static_cast<size_t>(y) * tmp_row;
    for (size_t i = 0; i < tmp_row; ++i) {
      dst[i] = static_cast<uint8_t>(RoundToDType(static_cast<float>(acc[i]), DType::kUInt8));
    }
  }
  return out;
}

ImageFormat SniffImageFormat(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPng, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

std::string_view ImageFormatExtension(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg:
      return "jpg";
    case ImageFormat::kPng:
      return "png";
    case ImageFormat::kUnknown:
      break;
  }
  return "";
}

Result<ShrinkResult> ShrinkToMaxSide(std::span<const uint8_t> bytes, int max_side, int quality,
                                     std::vector<uint8_t>& out) {
  const ImageFormat format = SniffImageFormat(bytes);
  if (format == ImageFormat::kUnknown) {
    return MakeError(ErrorCode::kCorruptData, "not a JPEG or PNG file (by its first bytes)");
  }
  const Decoder* found = ImageDecoderWithDefaults();
  if (found == nullptr) {
    return MakeError(ErrorCode::kInternal, "the decode_image decoder is missing from this build");
  }
  const Decoder& decoder = *found;
  auto header = decoder.ReadHeader(bytes);
  if (!header) return std::unexpected(header.error());
  ShrinkResult result;
  result.original_width = result.width = header->width;
  result.original_height = result.height = header->height;
  if (max_side <= 0 || std::max(header->width, header->height) <= max_side) return result;

  auto [w, h] = TargetSize(header->width, header->height, max_side);
  ImageBuffer image;
  // JPEG: DCT-domain scaling (1/2, 1/4, 1/8) as far as it keeps at least the
  // target size, as PIL's draft mode; the resampler does the rest.
  DecodeRequest request;
  request.crop = PixelRect{0, 0, header->width, header->height};
  request.min_width = w;
  request.min_height = h;
  auto decoded = decoder.Decode(bytes, request, image);
  if (!decoded) return std::unexpected(decoded.error());
  if (decoded->decoded.width != image.width() || decoded->crop_in_buffer.width != image.width() ||
      decoded->crop_in_buffer.height != image.height()) {
    return MakeError(ErrorCode::kInternal, "a whole-image decode returned a partial buffer");
  }
  if (image.channels() != 3) {
    return MakeError(ErrorCode::kInternal,
                     "decode_image gave " + std::to_string(image.channels()) + " channels");
  }
  std::vector<uint8_t> pixels =
      ResizeRgb8(image.row(0), image.width(), image.height(), image.stride(), w, h);
  Status encoded = format == ImageFormat::kJpeg ? EncodeJpeg(pixels, w, h, quality, out)
                                                : EncodePng(pixels, w, h, out);
  if (!encoded) return std::unexpected(encoded.error());
  result.resized = true;
  result.width = w;
  result.height = h;
  return result;
}

}  // namespace sluice::runtime
