// EXIF orientation applied to decoded pixels and to DecodedRegion geometry
// (the tag itself is read by ops/exif_orientation.h, shared with the ops'
// reference implementations).
#pragma once

#include <cstdint>
#include <span>

#include "ops/exif_orientation.h"
#include "runtime/decode/decoder.h"
#include "runtime/decode/image_buffer.h"

namespace sluice::runtime {

// Maps a rectangle of a stored image (width x height) to the oriented image;
// T is int or double. OrientRect and UnorientRect are inverses.
template <typename T>
void OrientRect(int orientation, T width, T height, T& x, T& y, T& w, T& h);
// Maps a rectangle of the oriented image (oriented_width x oriented_height)
// back to the stored image.
template <typename T>
void UnorientRect(int orientation, T oriented_width, T oriented_height, T& x, T& y, T& w, T& h);

// out = `in` with the orientation applied (out is reset to the oriented shape;
// it must not alias `in`).
void ApplyOrientation(int orientation, const ImageBuffer& in, ImageBuffer& out);

// The decoded region of `in` (in stored coordinates, buffer of buffer_width x
// buffer_height) as it reads after ApplyOrientation turned the buffer.
DecodedRegion OrientRegion(int orientation, const DecodedRegion& in, int buffer_width,
                           int buffer_height);

}  // namespace sluice::runtime
