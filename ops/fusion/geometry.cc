#include "ops/fusion/geometry.h"

#include <algorithm>
#include <cmath>

namespace sluice {
namespace {

// Upper bound on the taps of any output index (the kernel's reduction extent).
int32_t TapBound(int64_t window, int64_t resized, ref::Filter filter, bool antialias) {
  if (filter == ref::Filter::kNearest) return 1;
  const double base = filter == ref::Filter::kBicubic ? 2.0
                      : filter == ref::Filter::kArea  ? 0.5
                                                      : 1.0;
  const double scale = static_cast<double>(window) / static_cast<double>(resized);
  const double support = base * (antialias ? std::max(1.0, scale) : 1.0);
  const auto bound = static_cast<int64_t>(std::ceil(2.0 * support)) + 1;
  return static_cast<int32_t>(std::clamp<int64_t>(bound, 1, window));
}

}  // namespace

GeometryComposer::GeometryComposer(int64_t in_h, int64_t in_w)
    : in_h_(in_h), in_w_(in_w), y_{in_h, 1, 0, 0, in_h}, x_{in_w, 1, 0, 0, in_w} {}

void GeometryComposer::CropAxis(Axis& s, int64_t off, int64_t m) {
  s.b += s.a * off;
  s.vlo = std::clamp<int64_t>(s.vlo - off, 0, m);
  s.vhi = std::clamp<int64_t>(s.vhi - off, 0, m);
  if (s.vhi < s.vlo) s.vhi = s.vlo;
  s.n = m;
}

void GeometryComposer::FlipAxis(Axis& s) {
  s.b += s.a * (s.n - 1);
  s.a = -s.a;
  const int64_t lo = s.n - s.vhi, hi = s.n - s.vlo;
  s.vlo = lo;
  s.vhi = hi;
}

// Closes the pre-resize phase: the window is the current image; resample it to
// r pixels. The pre-resize flip (a == -1) is moved after the resampling (the
// resampling is mirror-symmetric).
void GeometryComposer::RescaleAxis(Axis& s, int64_t src_n, int64_t r, AxisArgs& out) {
  const int64_t w = s.n;
  int64_t jlo = s.vlo, jhi = s.vhi;
  int64_t start = s.b;
  const bool flipped = s.a < 0;
  if (flipped) {
    start = s.b - (w - 1);
    jlo = w - s.vhi;
    jhi = w - s.vlo;
  }
  out.window_start = static_cast<int32_t>(start);
  out.window = static_cast<int32_t>(w);
  int64_t lo = std::max<int64_t>(0, start + jlo), hi = std::min<int64_t>(src_n, start + jhi);
  if (hi < lo) hi = lo;
  out.src_lo = static_cast<int32_t>(lo);
  out.src_hi = static_cast<int32_t>(hi);
  out.resized = static_cast<int32_t>(r);
  s.n = r;
  s.a = flipped ? -1 : 1;
  s.b = flipped ? r - 1 : 0;
  s.vlo = 0;
  s.vhi = r;
}

void GeometryComposer::FinishAxis(const Axis& s, AxisArgs& out) {
  if (s.a < 0) {
    out.flip = 1;
    out.offset = static_cast<int32_t>(s.b - s.n + 1);
    out.valid_lo = static_cast<int32_t>(s.n - s.vhi);
    out.valid_hi = static_cast<int32_t>(s.n - s.vlo);
  } else {
    out.flip = 0;
    out.offset = static_cast<int32_t>(s.b);
    out.valid_lo = static_cast<int32_t>(s.vlo);
    out.valid_hi = static_cast<int32_t>(s.vhi);
  }
}

void GeometryComposer::Crop(int64_t top, int64_t left, int64_t h, int64_t w) {
  CropAxis(y_, top, h);
  CropAxis(x_, left, w);
}

void GeometryComposer::Flip(bool horizontal, bool vertical) {
  if (horizontal) FlipAxis(x_);
  if (vertical) FlipAxis(y_);
}

void GeometryComposer::Rescale(int64_t h, int64_t w, ref::Filter filter, bool antialias) {
  ay_.taps = TapBound(y_.n, h, filter, antialias);
  ax_.taps = TapBound(x_.n, w, filter, antialias);
  RescaleAxis(y_, in_h_, h, ay_);
  RescaleAxis(x_, in_w_, w, ax_);
  rescaled_ = true;
}

void GeometryComposer::Finish(SampleArgs& args) {
  if (!rescaled_) {
    ay_.taps = ax_.taps = 1;
    RescaleAxis(y_, in_h_, y_.n, ay_);
    RescaleAxis(x_, in_w_, x_.n, ax_);
    rescaled_ = true;
  }
  FinishAxis(y_, ay_);
  FinishAxis(x_, ax_);
  args.y = ay_;
  args.x = ax_;
  args.fill = fill_;
}

}  // namespace sluice
