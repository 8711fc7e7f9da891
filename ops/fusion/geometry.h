// GeometryComposer: composes a chain's geometry steps (crops, pads, flips and
// at most one rescale) into the per-axis arguments of a fused kernel
// (AxisArgs, see sample_args.h for their meaning).
//
// ComputeSampleArgs creates one per sample and hands it to every geometry
// step's GeometryFusion::compose hook (declared in the op's own file, e.g.
// ops/geometry_ops.cc); a hook reads the current size and calls the
// operations below. Each operation is exact integer index arithmetic per axis:
// before the rescale, current index i maps to source index a * i + b; after
// it, to resampled-grid index a * i + b; pixels outside [vlo, vhi) are `fill`.
//
// Thread safety: a value type; no shared state. No heap allocation.
#pragma once

#include <cstdint>

#include "ops/fusion/sample_args.h"
#include "ops/reference/resample.h"

namespace sluice {

class GeometryComposer {
 public:
  GeometryComposer(int64_t in_h, int64_t in_w);

  // The current image's size (after the steps composed so far).
  int64_t height() const { return y_.n; }
  int64_t width() const { return x_.n; }

  // Keeps rows [top, top + h) and columns [left, left + w) of the current
  // image; offsets may be negative and the window may leave the image (those
  // pixels become the fill).
  void Crop(int64_t top, int64_t left, int64_t h, int64_t w);
  // Mirrors the current image left-right and/or top-bottom.
  void Flip(bool horizontal, bool vertical);
  // The chain's one rescale: resamples the current image to h x w as
  // ref::ResizeHWC(filter, antialias) does. Call at most once.
  void Rescale(int64_t h, int64_t w, ref::Filter filter, bool antialias);
  // The value (already rounded to uint8) of added / out-of-image pixels.
  void SetFill(float value) { fill_ = value; }

  // Writes the composed y, x and fill into `args` (draw slots untouched).
  void Finish(SampleArgs& args);

 private:
  struct Axis {
    int64_t n = 0;
    int64_t a = 1, b = 0;
    int64_t vlo = 0, vhi = 0;
  };
  static void CropAxis(Axis& s, int64_t off, int64_t m);
  static void FlipAxis(Axis& s);
  static void RescaleAxis(Axis& s, int64_t src_n, int64_t r, AxisArgs& out);
  static void FinishAxis(const Axis& s, AxisArgs& out);

  int64_t in_h_, in_w_;
  Axis y_, x_;
  AxisArgs ay_, ax_;
  float fill_ = 0.0f;
  bool rescaled_ = false;
};

}  // namespace sluice
