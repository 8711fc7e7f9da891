// EXIF orientation tag reader, shared by the decode_jpeg / decode_image
// reference implementations (ops/decode_ops.cc) and the runtime decoders
// (runtime/decode/orientation.h applies the transform).
//
// A small bounds-checked TIFF IFD0 walk for one tag (0x0112), not a general
// EXIF parser: libexif would be a new dependency for one integer, and the walk
// touches at most a few hundred bytes of the file. Anything malformed, missing
// or out of range reads as orientation 1 (PIL's ImageOps.exif_transpose also
// leaves such images alone).
//
// Orientation values (EXIF 2.3, and the transforms PIL's exif_transpose
// applies): 1 none, 2 mirror left-right, 3 rotate 180, 4 mirror top-bottom,
// 5 transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate 90
// counter-clockwise. 5..8 swap width and height.
#pragma once

#include <cstdint>
#include <span>

namespace sluice {

// The orientation (1..8) in a JPEG's first APP1 "Exif" segment before the
// first scan (the segment PIL reads); 1 when absent or unreadable.
int JpegExifOrientation(std::span<const uint8_t> jpeg);

// The orientation (1..8) in a PNG's first eXIf chunk, wherever it stands
// (PIL reads one after the image data too); 1 when absent or unreadable.
// Walks the chunk headers only; CRCs are not checked here.
int PngExifOrientation(std::span<const uint8_t> png);

// The orientation tag of a TIFF structure (byte-order mark, IFD0), as found
// after "Exif\0\0" in APP1 or in a PNG eXIf chunk; 1 when absent or unreadable.
int TiffOrientation(std::span<const uint8_t> tiff);

// Orientations 5..8 swap width and height.
inline bool SwapsAxes(int orientation) { return orientation >= 5 && orientation <= 8; }

}  // namespace sluice
