// Lossless re-encoding of JPEGs with restart markers, for `sluice pack`.
//
// The DCT coefficients are copied unchanged (libjpeg's transcoding API, as
// jpegtran does), so every decoder gives the same pixels as from the original;
// only the entropy coding changes: Huffman tables optimized for the image, and
// a restart marker every K MCUs, K dividing the MCUs per row and spanning at
// most 64 pixels. The loader's JPEG decoder then entropy-decodes only the
// tiles a random crop needs (runtime/decode/jpeg_restart_splice.h). The
// optimized tables about pay for the markers: files stay within about 1% of
// their size.
//
// Only 8-bit baseline (sequential Huffman) YCbCr and grayscale JPEGs are
// re-encoded, and only when they decode without a warning: progressive,
// arithmetic-coded, 12-bit, RGB, CMYK and YCCK files, damaged ones, and files
// that already have row-aligned restart intervals are kept as they are, and so
// are images the loader's decoder refuses by default (over kMaxJpegSide per
// side or kDefaultMaxPixels in all; re-encoding holds every coefficient in
// memory, and a few hundred bytes can claim 65500x65500 pixels). Every
// APPn and COM marker (EXIF orientation, ICC profile) is carried over.
// Deterministic: the output is a pure function of the input bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sluice::runtime {

// True when `jpeg` was re-encoded into `out` (replacing its content); false
// when it is kept as it is (see above), `out` then unspecified.
bool AddRestartMarkers(std::span<const uint8_t> jpeg, std::vector<uint8_t>& out);

}  // namespace sluice::runtime
