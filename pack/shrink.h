// Shrinking oversized images for `sluice pack --max-side N` (as FFCV's
// max_resolution): an image whose longer side exceeds N is decoded (EXIF
// orientation applied), resized so its longer side is N (antialiased bilinear,
// PIL/torchvision style: ops/reference/resample.h) and re-encoded in its own
// format: JPEG at `quality` (4:2:0), PNG losslessly as 8-bit RGB. An image
// already small enough is kept byte for byte. The result is a pure function of
// (bytes, max_side, quality), so packing stays deterministic.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime {

enum class ImageFormat { kJpeg, kPng, kUnknown };

// The format named by the payload's magic bytes (not by any file name).
ImageFormat SniffImageFormat(std::span<const uint8_t> bytes);
// "jpg", "png", or "" for kUnknown: the member extension pack writes.
std::string_view ImageFormatExtension(ImageFormat format);

struct ShrinkResult {
  bool resized = false;  // false: the input is kept as it is
  int original_width = 0, original_height = 0;
  int width = 0, height = 0;  // after resizing (= original when kept)
};

// Antialiased bilinear resize of 8-bit RGB rows (`stride` bytes apart) to
// out_w x out_h, packed. Equal byte for byte to ref::ResizeHWC with
// Filter::kBilinear and antialias (the same taps, summed in the same order in
// double precision), without its per-pixel bounds checks and float copies.
std::vector<uint8_t> ResizeRgb8(const uint8_t* rgb, int width, int height, size_t stride, int out_w,
                                int out_h);

// When `bytes` is larger than `max_side` on its longer side, writes the shrunk
// re-encoded image into `out` (replacing its content) and returns resized =
// true; otherwise leaves `out` alone. max_side <= 0: always kept (only the
// header is read). Errors: kCorruptData (undecodable, or not JPEG/PNG), kIo
// (the encoder failed).
Result<ShrinkResult> ShrinkToMaxSide(std::span<const uint8_t> bytes, int max_side, int quality,
                                     std::vector<uint8_t>& out);

}  // namespace sluice::runtime
