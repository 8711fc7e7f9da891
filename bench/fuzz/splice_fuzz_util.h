// Shared by jpeg_splice_fuzz.cc and restart_markers_fuzz.cc: the checks of the
// restart-interval splice (runtime/decode/jpeg_restart_splice.h) and of
// DecodeJpeg's use of it. Each aborts, after a line on stdout, when broken.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "runtime/decode/decoder.h"
#include "runtime/decode/image_buffer.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/decode/jpeg_restart_splice.h"

namespace sluice::fuzz {

[[noreturn]] inline void SpliceFailure(const char* what, const runtime::PixelRect& crop) {
  std::printf("splice check failed: %s (crop x=%d y=%d w=%d h=%d)\n", what, crop.x, crop.y,
              crop.width, crop.height);
  std::fflush(stdout);
  std::abort();
}

// SpliceRestartIntervals on `file` (whose header libjpeg read as `info`): on a
// success, the origin lies on the MCU grid inside the image the header
// describes, and the spliced file is a JPEG of the tiles covering `crop` grown
// by `margin` (clipped to the image), ending with an EOI.
inline void CheckSplice(std::span<const uint8_t> file, const runtime::JpegInfo& info,
                        const runtime::PixelRect& crop, int margin) {
  std::vector<uint8_t> out;
  const auto origin = runtime::SpliceRestartIntervals(file, crop, margin, out);
  if (!origin) return;
  if (origin->image_width != info.width || origin->image_height != info.height) {
    SpliceFailure("the splice read another image size than libjpeg", crop);
  }
  if (origin->x < 0 || origin->y < 0 || origin->x % 8 != 0 || origin->y % 8 != 0 ||
      origin->x > std::max(0, crop.x - margin) || origin->y > std::max(0, crop.y - margin)) {
    SpliceFailure("origin off the MCU grid or right of / below the crop's margin", crop);
  }
  if (out.size() < 4 || out.size() >= file.size() || out[out.size() - 2] != 0xFF ||
      out.back() != 0xD9) {
    SpliceFailure("the spliced file is no smaller, or does not end with an EOI", crop);
  }
  const auto part = runtime::ReadJpegHeader(out);
  if (!part) SpliceFailure("libjpeg cannot read the spliced file's header", crop);
  const int64_t right = int64_t{origin->x} + part->width;
  const int64_t bottom = int64_t{origin->y} + part->height;
  if (part->components != info.components || right > info.width || bottom > info.height ||
      right < std::min<int64_t>(info.width, int64_t{crop.x} + crop.width + margin) ||
      bottom < std::min<int64_t>(info.height, int64_t{crop.y} + crop.height + margin)) {
    SpliceFailure("the spliced image does not cover the crop and its margin", crop);
  }
}

// DecodeJpeg (which splices what qualifies) against DecodeJpegUnspliced, on
// the same request: where the unspliced decode succeeds without a warning,
// the other gives the same region and the same buffer, without a warning.
inline void CheckSplicedDecode(std::span<const uint8_t> file, const runtime::DecodeRequest& req) {
  static runtime::ImageBuffer a, b;  // reused across inputs
  const auto rb = runtime::DecodeJpegUnspliced(file, req, b);
  const auto ra = runtime::DecodeJpeg(file, req, a);
  const runtime::PixelRect crop = req.crop.value_or(runtime::PixelRect{});
  if (!rb || rb->warnings > 0) return;
  if (!ra) {
    std::printf("%s\n", ra.error().ToString().c_str());
    SpliceFailure("DecodeJpeg failed where the unspliced decode did not", crop);
  }
  if (ra->warnings != 0) SpliceFailure("warnings only through the splice", crop);
  if (ra->scale_denom != rb->scale_denom || ra->scaled_width != rb->scaled_width ||
      ra->scaled_height != rb->scaled_height || !(ra->decoded == rb->decoded) ||
      !(ra->crop_in_buffer == rb->crop_in_buffer) || ra->crop_x != rb->crop_x ||
      ra->crop_y != rb->crop_y || ra->crop_width != rb->crop_width ||
      ra->crop_height != rb->crop_height) {
    std::printf("d=%d/%d decoded=(%d,%d %dx%d)/(%d,%d %dx%d)\n", ra->scale_denom, rb->scale_denom,
                ra->decoded.x, ra->decoded.y, ra->decoded.width, ra->decoded.height, rb->decoded.x,
                rb->decoded.y, rb->decoded.width, rb->decoded.height);
    SpliceFailure("another DecodedRegion through the splice", crop);
  }
  if (a.width() != b.width() || a.height() != b.height() || a.channels() != b.channels()) {
    SpliceFailure("another buffer size through the splice", crop);
  }
  const size_t row_bytes = static_cast<size_t>(a.width()) * a.channels();
  for (int y = 0; y < a.height(); ++y) {
    if (std::memcmp(a.row(y), b.row(y), row_bytes) != 0) {
      std::printf("row %d of %d differs\n", y, a.height());
      SpliceFailure("other pixels through the splice", crop);
    }
  }
}

}  // namespace sluice::fuzz
