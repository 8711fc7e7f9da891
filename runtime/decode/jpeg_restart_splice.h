// Cropping a JPEG in the compressed domain, through its restart markers.
//
// A baseline JPEG written with a restart interval (DRI) is a sequence of
// self-contained entropy-coded segments: at every restart marker the DC
// predictions and the bit buffer start afresh. When each interval lies within
// one MCU row (the MCUs per row are a multiple of the interval), the segments
// form a grid of tiles, and the tiles covering a rectangle are themselves a
// valid JPEG: the same tables, a smaller frame size, the same interval, and
// the segments concatenated with their restart markers renumbered. No bit of
// entropy-coded data is decoded or changed, so decoding that smaller JPEG
// gives exactly the coefficients, and so the pixels, of the same region of the
// whole image (away from its new edges, where upsampling replicates).
//
// Damage inside tiles the crop does not need goes unseen, as damage below a
// crop does on the plain path (which stops at the crop's last row); a file
// cut short is never spliced, so it is found bad whatever the crop.
//
// This lets the decoder skip the Huffman decoding of everything outside a
// random crop, which libjpeg-turbo's own cropping cannot (it skips the IDCT of
// outside columns but must still entropy-decode every row up to the crop's
// bottom). `sluice pack` writes shards whose JPEGs have such intervals
// (pack/restart_markers.h); any other JPEG with row-aligned intervals
// qualifies too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "runtime/decode/decoder.h"

namespace sluice::runtime {

// Where the spliced JPEG sits in the original, in full-resolution pixels.
// x and y are multiples of the MCU size (8 or 16), so of every DCT scale.
// image_width and image_height are the whole image's, from its frame header.
struct SpliceOrigin {
  int x = 0;
  int y = 0;
  int image_width = 0;
  int image_height = 0;
};

// Writes into `out` (reused: it only grows) a JPEG holding the restart
// intervals that cover `need` grown by `margin` pixels on every side (clipped
// to the image), and returns its origin in the original. Returns nullopt, with
// `out` unspecified, when `data` does not qualify or the splice would not save
// at least a quarter of the entropy-coded bytes: not a single-scan 8-bit
// baseline Huffman JPEG, no restart interval or one that does not divide the
// MCUs per row, restart markers out of sequence or miscounted, no EOI after
// the scan (a truncated file must be decoded whole to be found bad), or any
// other marker inside the scan, or a marker without a length (RSTn, TEM) before
// it. `need` must lie inside the image, and `margin` be at least 0.
std::optional<SpliceOrigin> SpliceRestartIntervals(std::span<const uint8_t> data,
                                                   const PixelRect& need, int margin,
                                                   std::vector<uint8_t>& out);

}  // namespace sluice::runtime
