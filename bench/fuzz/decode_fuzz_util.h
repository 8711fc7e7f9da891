// Shared by the decoder harnesses (jpeg_decode_fuzz.cc, png_decode_fuzz.cc):
// the request a few leading input bytes describe, and the checks every
// successful decode must pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "runtime/decode/decoder.h"
#include "runtime/decode/image_buffer.h"

namespace sluice::fuzz {

// Leading bytes of a decoder harness's input; the image follows.
//   [0] flags: bit 0 gray, bit 1 EXIF orientation / keep alpha, bit 2
//       fail_on_warning, bit 3 fast_dct, bit 4 crop, bit 5 raw crop (the
//       bytes as pixels, possibly outside the image: the decoder must refuse
//       it), bit 6 min sizes (DCT scaling)
//   [1..4] crop x, y, width, height in 255ths of the image (raw: pixels)
//   [5..6] min_width, min_height in 255ths of the crop
//   [7] reserved
inline constexpr size_t kDecodePrefix = 8;

// Images over this many pixels are only parsed (ReadHeader), not decoded, so
// that a fuzzed SOF/IHDR size does not turn every run into a slow 200 MP
// decode; the decoders' own size limits are tested by their unit tests.
inline constexpr int64_t kMaxFuzzPixels = 4'000'000;

inline runtime::DecodeRequest RequestFromBytes(const uint8_t* p, int width, int height) {
  runtime::DecodeRequest r;
  const uint8_t flags = p[0];
  r.color = (flags & 1) ? runtime::OutputColor::kGray : runtime::OutputColor::kRGB;
  r.fail_on_warning = (flags & 4) != 0;
  r.fast_dct = (flags & 8) != 0;
  int cw = width, ch = height;
  if (flags & 16) {
    runtime::PixelRect c;
    if (flags & 32) {
      c = {p[1] - 8, p[2] - 8, p[3], p[4]};
    } else {
      c.x = static_cast<int>(int64_t{width} * p[1] / 256);
      c.y = static_cast<int>(int64_t{height} * p[2] / 256);
      c.width = std::max(1, static_cast<int>(int64_t{width - c.x} * p[3] / 255));
      c.height = std::max(1, static_cast<int>(int64_t{height - c.y} * p[4] / 255));
    }
    r.crop = c;
    cw = c.width;
    ch = c.height;
  }
  if (flags & 64) {
    r.min_width = static_cast<int>(int64_t{cw} * p[5] / 255);
    r.min_height = static_cast<int>(int64_t{ch} * p[6] / 255);
  }
  return r;
}

// The contract of DecodedRegion (runtime/decode/decoder.h) on a success.
inline void CheckRegion(const runtime::DecodedRegion& region, const runtime::ImageBuffer& out,
                        int channels) {
  const runtime::PixelRect& d = region.decoded;
  const runtime::PixelRect& c = region.crop_in_buffer;
  const bool ok = (region.scale_denom == 1 || region.scale_denom == 2 || region.scale_denom == 4 ||
                   region.scale_denom == 8) &&
                  out.width() == d.width && out.height() == d.height &&
                  out.channels() == channels && d.x >= 0 && d.y >= 0 &&
                  d.x + d.width <= region.scaled_width && d.y + d.height <= region.scaled_height &&
                  c.x >= 0 && c.y >= 0 && c.width > 0 && c.height > 0 && c.x + c.width <= d.width &&
                  c.y + c.height <= d.height;
  if (!ok) {
    __builtin_printf(
        "decoded region breaks its contract: d=%d scaled=%dx%d decoded=(%d,%d %dx%d) "
        "buffer=%dx%dx%d crop_in_buffer=(%d,%d %dx%d)\n",
        region.scale_denom, region.scaled_width, region.scaled_height, d.x, d.y, d.width, d.height,
        out.width(), out.height(), out.channels(), c.x, c.y, c.width, c.height);
    std::abort();
  }
}

}  // namespace sluice::fuzz
