#include "runtime/decode/orientation.h"

#include <cstring>
#include <utility>

namespace sluice::runtime {
namespace {

// The transform of an orientation: transpose first, then mirror the
// (transposed) x and y axes.
struct Flips {
  bool transpose, flip_x, flip_y;
};
Flips FlipsOf(int o) {
  switch (o) {
    case 2:
      return {false, true, false};
    case 3:
      return {false, true, true};
    case 4:
      return {false, false, true};
    case 5:
      return {true, false, false};
    case 6:
      return {true, true, false};
    case 7:
      return {true, true, true};
    case 8:
      return {true, false, true};
    default:
      return {false, false, false};
  }
}

}  // namespace

template <typename T>
void OrientRect(int orientation, T width, T height, T& x, T& y, T& w, T& h) {
  const Flips f = FlipsOf(orientation);
  if (f.transpose) {
    std::swap(x, y);
    std::swap(w, h);
    std::swap(width, height);
  }
  if (f.flip_x) x = width - x - w;
  if (f.flip_y) y = height - y - h;
}

template <typename T>
void UnorientRect(int orientation, T oriented_width, T oriented_height, T& x, T& y, T& w, T& h) {
  const Flips f = FlipsOf(orientation);
  if (f.flip_x) x = oriented_width - x - w;
  if (f.flip_y) y = oriented_height - y - h;
  if (f.transpose) {
    std::swap(x, y);
    std::swap(w, h);
  }
}

template void OrientRect<int>(int, int, int, int&, int&, int&, int&);
template void OrientRect<double>(int, double, double, double&, double&, double&, double&);
template void UnorientRect<int>(int, int, int, int&, int&, int&, int&);
template void UnorientRect<double>(int, double, double, double&, double&, double&, double&);

void ApplyOrientation(int orientation, const ImageBuffer& in, ImageBuffer& out) {
  const Flips f = FlipsOf(orientation);
  const int iw = in.width(), ih = in.height(), c = in.channels();
  const int ow = f.transpose ? ih : iw, oh = f.transpose ? iw : ih;
  out.Reset(ow, oh, c);
  for (int oy = 0; oy < oh; ++oy) {
    uint8_t* dst = out.row(oy);
    const int v = f.flip_y ? oh - 1 - oy : oy;
    if (!f.transpose) {
      const uint8_t* src = in.row(v);
      if (!f.flip_x) {
        std::memcpy(dst, src, static_cast<size_t>(ow) * c);
        continue;
      }
      for (int ox = 0; ox < ow; ++ox) std::memcpy(dst + ox * c, src + (ow - 1 - ox) * c, c);
      continue;
    }
    // Transposed: output row oy reads stored column v, rows u.
    for (int ox = 0; ox < ow; ++ox) {
      const int u = f.flip_x ? ow - 1 - ox : ox;
      std::memcpy(dst + ox * c, in.row(u) + static_cast<size_t>(v) * c, c);
    }
  }
}

DecodedRegion OrientRegion(int orientation, const DecodedRegion& in, int buffer_width,
                           int buffer_height) {
  DecodedRegion r = in;
  if (SwapsAxes(orientation)) std::swap(r.scaled_width, r.scaled_height);
  PixelRect& d = r.decoded;
  OrientRect(orientation, in.scaled_width, in.scaled_height, d.x, d.y, d.width, d.height);
  OrientRect<double>(orientation, buffer_width, buffer_height, r.crop_x, r.crop_y, r.crop_width,
                     r.crop_height);
  PixelRect& c = r.crop_in_buffer;
  OrientRect(orientation, buffer_width, buffer_height, c.x, c.y, c.width, c.height);
  return r;
}

}  // namespace sluice::runtime
