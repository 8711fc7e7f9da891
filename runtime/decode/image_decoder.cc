#include "runtime/decode/image_decoder.h"

#include <cstring>

namespace sluice::runtime {
namespace {

std::unexpected<Error> NeitherFormat(std::span<const uint8_t> data) {
  return MakeError(ErrorCode::kCorruptData,
                   data.empty() ? std::string("decode_image: empty file")
                                : std::string("decode_image: neither a JPEG nor a PNG file "
                                              "(unknown magic bytes)"));
}

// out = `in` (c channels) plus an opaque alpha channel.
void AddOpaqueAlpha(const ImageBuffer& in, ImageBuffer& out) {
  const int c = in.channels();
  out.Reset(in.width(), in.height(), c + 1);
  for (int y = 0; y < in.height(); ++y) {
    const uint8_t* src = in.row(y);
    uint8_t* dst = out.row(y);
    for (int x = 0; x < in.width(); ++x, src += c, dst += c + 1) {
      std::memcpy(dst, src, c);
      dst[c] = 255;
    }
  }
}

}  // namespace

Result<std::unique_ptr<Decoder>> ImageDecoder::Create(const ParamList& params) {
  auto jpeg = JpegDecoder::ParseOptions("decode_image", params);
  if (!jpeg) return std::unexpected(jpeg.error());
  auto png = PngDecoder::ParseOptions("decode_image", params);
  if (!png) return std::unexpected(png.error());
  return std::unique_ptr<Decoder>(new ImageDecoder(*jpeg, *png));
}

Result<ImageHeader> ImageDecoder::ReadHeader(std::span<const uint8_t> data) const {
  if (LooksLikePng(data)) return png_.ReadHeader(data);
  if (!LooksLikeJpeg(data)) return NeitherFormat(data);
  auto header = jpeg_.ReadHeader(data);
  if (header && keep_alpha_) ++header->channels;
  return header;
}

Result<DecodedRegion> ImageDecoder::Decode(std::span<const uint8_t> data,
                                           const DecodeRequest& request, ImageBuffer& out) const {
  if (LooksLikePng(data)) return png_.Decode(data, request, out);
  if (!LooksLikeJpeg(data)) return NeitherFormat(data);
  if (!keep_alpha_) return jpeg_.Decode(data, request, out);
  thread_local ImageBuffer opaque;  // per thread, reused
  auto region = jpeg_.Decode(data, request, opaque);
  if (region) AddOpaqueAlpha(opaque, out);
  return region;
}

}  // namespace sluice::runtime
