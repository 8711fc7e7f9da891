#include "ops/reference/resample.h"

#include <algorithm>
#include <cmath>

namespace sluice::ref {
namespace {

double Triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double Keys(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

double Box(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

}  // namespace

std::pair<int64_t, int64_t> ShorterSideSize(int64_t h, int64_t w, int64_t size,
                                            const ParamValue* max_size) {
  const bool w_short = w <= h;
  const int64_t shorter = w_short ? w : h, longer = w_short ? h : w;
  int64_t new_short = size;
  int64_t new_long = static_cast<int64_t>(static_cast<double>(size) * longer / shorter);
  if (max_size && new_long > max_size->AsInt()) {
    new_short = static_cast<int64_t>(static_cast<double>(max_size->AsInt()) * new_short / new_long);
    new_long = max_size->AsInt();
  }
  return w_short ? std::pair{new_long, new_short} : std::pair{new_short, new_long};
}

Filter ParseFilter(std::string_view name) {
  if (name == "bicubic") return Filter::kBicubic;
  if (name == "area") return Filter::kArea;
  if (name == "nearest") return Filter::kNearest;
  return Filter::kBilinear;
}

std::vector<Taps> ResampleTaps(int64_t in_size, int64_t out_size, Filter filter, bool antialias) {
  std::vector<Taps> taps(static_cast<size_t>(out_size));
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  if (filter == Filter::kNearest) {
    for (int64_t i = 0; i < out_size; ++i) {
      taps[i].first = std::min<int64_t>(static_cast<int64_t>(std::floor(i * scale)), in_size - 1);
      taps[i].weights = {1.0};
    }
    return taps;
  }
  double (*fn)(double) = filter == Filter::kBicubic ? Keys
                         : filter == Filter::kArea  ? Box
                                                    : Triangle;
  const double base_support = filter == Filter::kBicubic ? 2.0
                              : filter == Filter::kArea  ? 0.5
                                                         : 1.0;
  const double filter_scale = antialias ? std::max(1.0, scale) : 1.0;
  const double support = base_support * filter_scale;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(center - support + 0.5));
    const int64_t hi = std::min<int64_t>(in_size, static_cast<int64_t>(center + support + 0.5));
    Taps& t = taps[i];
    t.first = lo;
    double total = 0.0;
    for (int64_t j = lo; j < hi; ++j) {
      const double w = fn((static_cast<double>(j) - center + 0.5) / filter_scale);
      t.weights.push_back(w);
      total += w;
    }
    if (total != 0.0) {
      for (double& w : t.weights) w /= total;
    } else {
      // Only possible for degenerate windows; fall back to the nearest pixel.
      t.first = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in_size - 1);
      t.weights = {1.0};
    }
  }
  return taps;
}

RefTensor ResizeHWC(const RefTensor& in, int64_t out_h, int64_t out_w, Filter filter,
                    bool antialias) {
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  const auto xtaps = ResampleTaps(w, out_w, filter, antialias);
  const auto ytaps = ResampleTaps(h, out_h, filter, antialias);
  // Horizontal pass into a double buffer [h][out_w][c].
  std::vector<double> tmp(static_cast<size_t>(h * out_w * c));
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < out_w; ++x) {
      const Taps& t = xtaps[x];
      for (int64_t ch = 0; ch < c; ++ch) {
        double acc = 0.0;
        for (size_t k = 0; k < t.weights.size(); ++k) {
          acc += t.weights[k] * in.at(y, t.first + static_cast<int64_t>(k), ch);
        }
        tmp[(y * out_w + x) * c + ch] = acc;
      }
    }
  }
  RefTensor out = RefTensor::Zeros(in.type.dtype, Layout::kHWC, {out_h, out_w, c});
  for (int64_t y = 0; y < out_h; ++y) {
    const Taps& t = ytaps[y];
    for (int64_t x = 0; x < out_w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        double acc = 0.0;
        for (size_t k = 0; k < t.weights.size(); ++k) {
          acc += t.weights[k] * tmp[((t.first + static_cast<int64_t>(k)) * out_w + x) * c + ch];
        }
        out.at(y, x, ch) = RoundToDType(static_cast<float>(acc), in.type.dtype);
      }
    }
  }
  return out;
}

RefTensor CropHWC(const RefTensor& in, int64_t top, int64_t left, int64_t height, int64_t width,
                  float fill) {
  const int64_t h = in.height(), w = in.width(), c = in.channels();
  const float f = RoundToDType(fill, in.type.dtype);
  RefTensor out = RefTensor::Zeros(in.type.dtype, Layout::kHWC, {height, width, c});
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      const int64_t sy = top + y, sx = left + x;
      const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
      for (int64_t ch = 0; ch < c; ++ch) out.at(y, x, ch) = inside ? in.at(sy, sx, ch) : f;
    }
  }
  return out;
}

CropBox RandomResizedCropBox(int64_t height, int64_t width, const std::vector<double>& scale,
                             const std::vector<double>& ratio, SampleRng& rng) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_lo = std::log(ratio[0]), log_hi = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int64_t top = rng.UniformInt(0, height - h);
      const int64_t left = rng.UniformInt(0, width - w);
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < ratio[0]) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / ratio[0]));
  } else if (in_ratio > ratio[1]) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * ratio[1]));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

}  // namespace sluice::ref
