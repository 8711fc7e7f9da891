#include "ops/fusion/sample_args.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "ops/families.h"
#include "ops/random.h"
#include "ops/reference/resample.h"

namespace sluice {
namespace {

using namespace ops_internal;

// One axis while composing. Before the rescaling op, current index i maps to
// source index a * i + b; after it, to resampled-grid index a * i + b. Valid
// (not fill) iff i is in [vlo, vhi), a sub-range of [0, n).
struct AxisState {
  int64_t n = 0;
  int64_t a = 1, b = 0;
  int64_t vlo = 0, vhi = 0;
};

void Crop(AxisState& s, int64_t off, int64_t m) {
  s.b += s.a * off;
  s.vlo = std::clamp<int64_t>(s.vlo - off, 0, m);
  s.vhi = std::clamp<int64_t>(s.vhi - off, 0, m);
  if (s.vhi < s.vlo) s.vhi = s.vlo;
  s.n = m;
}

void Flip(AxisState& s) {
  s.b += s.a * (s.n - 1);
  s.a = -s.a;
  const int64_t lo = s.n - s.vhi, hi = s.n - s.vlo;
  s.vlo = lo;
  s.vhi = hi;
}

// Closes the pre-resize phase: the window is the current image; resample it to
// r pixels. The pre-resize flip (a == -1) is moved after the resampling (the
// resampling is mirror-symmetric).
void Rescale(AxisState& s, int64_t src_n, int64_t r, AxisArgs& out) {
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

void Finish(const AxisState& s, AxisArgs& out) {
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

bool IsRescale(std::string_view name) { return name == "resize" || name == "random_resized_crop"; }

}  // namespace

Status CheckFusable(const FusedChain& chain) {
  auto unsupported = [&](const std::string& why) {
    return MakeError(ErrorCode::kUnsupported,
                     "chain `" + chain.symbol + "` cannot be fused: " + why,
                     "it runs on the reference implementations instead");
  };
  if (chain.input.rank() != 3 || chain.input.dtype != DType::kUInt8 ||
      chain.input.layout != Layout::kHWC) {
    return unsupported("input must be a uint8 HWC image, got " + chain.input.ToString());
  }
  const int64_t c = chain.input.dims[2];
  if (c != 1 && c != 3) return unsupported("input must have 1 or 3 channels");
  if (!chain.output.is_static() || chain.output.rank() != 3 ||
      chain.output.layout == Layout::kNone) {
    return unsupported("output must be a static image, got " + chain.output.ToString());
  }
  bool pointwise_seen = false;
  int rescales = 0;
  bool zero_fill_ops = false;
  std::optional<double> pad_fill;
  for (const ChainStep& step : chain.steps) {
    if (!step.op) return unsupported("a step has no op");
    const std::string& name = step.op->name;
    if (step.op->op_class == OpClass::kResample) {
      if (pointwise_seen) return unsupported("`" + name + "` follows a pointwise op");
      if (IsRescale(name) && ++rescales > 1) return unsupported("more than one rescaling op");
      if (name == "crop" || name == "center_crop") zero_fill_ops = true;
      if (name == "pad") {
        if (P(step.params, "mode").AsString() != "constant") {
          return unsupported("`pad` with mode " + P(step.params, "mode").AsString() +
                             " (only constant is fused)");
        }
        const double f = P(step.params, "fill").AsFloat();
        if (pad_fill && *pad_fill != f) return unsupported("`pad` ops with different fills");
        pad_fill = f;
      }
    } else if (step.op->op_class == OpClass::kPointwise) {
      pointwise_seen = true;
    } else {
      return unsupported("`" + name + "` is not a resample or pointwise op");
    }
  }
  if (zero_fill_ops && pad_fill &&
      RoundToDType(static_cast<float>(*pad_fill), DType::kUInt8) != 0) {
    return unsupported("`pad` fill differs from the zeros of crop/center_crop");
  }
  return Ok();
}

Result<SampleArgs> ComputeSampleArgs(const FusedChain& chain, int64_t in_h, int64_t in_w,
                                     uint64_t seed, uint64_t epoch, uint64_t sample) {
  if (in_h < 1 || in_w < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "empty input image " + std::to_string(in_h) + "x" + std::to_string(in_w));
  }
  SampleArgs args;
  AxisState ys{in_h, 1, 0, 0, in_h}, xs{in_w, 1, 0, 0, in_w};
  bool rescaled = false;
  // The one rescaling op (resize or random_resized_crop) to h x w.
  auto rescale = [&](const ParamList& p, int64_t h, int64_t w) {
    const ref::Filter f = ref::ParseFilter(P(p, "interpolation").AsString());
    const bool aa = P(p, "antialias").AsBool();
    args.y.taps = TapBound(ys.n, h, f, aa);
    args.x.taps = TapBound(xs.n, w, f, aa);
    Rescale(ys, in_h, h, args.y);
    Rescale(xs, in_w, w, args.x);
    rescaled = true;
  };
  for (const ChainStep& step : chain.steps) {
    const std::string& name = step.op->name;
    const ParamList& p = step.params;
    if (name == "crop") {
      Crop(ys, P(p, "top").AsInt(), P(p, "height").AsInt());
      Crop(xs, P(p, "left").AsInt(), P(p, "width").AsInt());
    } else if (name == "center_crop") {
      auto [ch, cw] = SizeHW(P(p, "size").AsIntList());
      const int64_t h = ys.n, w = xs.n;
      const int64_t pad_top = ch > h ? (ch - h) / 2 : 0, pad_left = cw > w ? (cw - w) / 2 : 0;
      const int64_t ph = h + pad_top + (ch > h ? (ch - h + 1) / 2 : 0);
      const int64_t pw = w + pad_left + (cw > w ? (cw - w + 1) / 2 : 0);
      const auto top = static_cast<int64_t>(std::nearbyint((ph - ch) / 2.0));
      const auto left = static_cast<int64_t>(std::nearbyint((pw - cw) / 2.0));
      Crop(ys, top - pad_top, ch);
      Crop(xs, left - pad_left, cw);
    } else if (name == "pad") {
      const auto ltrb = PadLTRB(P(p, "padding").AsIntList());
      Crop(ys, -ltrb[1], ys.n + ltrb[1] + ltrb[3]);
      Crop(xs, -ltrb[0], xs.n + ltrb[0] + ltrb[2]);
      args.fill = RoundToDType(static_cast<float>(P(p, "fill").AsFloat()), DType::kUInt8);
    } else if (name == "random_flip") {
      SampleRng rng(seed, epoch, sample, static_cast<uint32_t>(step.op_id));
      const bool fx = rng.Bernoulli(P(p, "horizontal").AsFloat());
      const bool fy = rng.Bernoulli(P(p, "vertical").AsFloat());
      if (fx) Flip(xs);
      if (fy) Flip(ys);
    } else if (name == "random_resized_crop") {
      SampleRng rng(seed, epoch, sample, static_cast<uint32_t>(step.op_id));
      const ref::CropBox box = ref::RandomResizedCropBox(ys.n, xs.n, P(p, "scale").AsFloatList(),
                                                         P(p, "ratio").AsFloatList(), rng);
      Crop(ys, box.top, box.height);
      Crop(xs, box.left, box.width);
      auto [h, w] = SizeHW(P(p, "size").AsIntList());
      rescale(p, h, w);
    } else if (name == "resize") {
      const auto& size = P(p, "size").AsIntList();
      auto [h, w] = size.size() == 1
                        ? ref::ShorterSideSize(ys.n, xs.n, size[0], FindParam(p, "max_size"))
                        : std::pair{size[0], size[1]};
      rescale(p, h, w);
    } else if (name == "color_jitter") {
      SampleRng rng(seed, epoch, sample, static_cast<uint32_t>(step.op_id));
      float* factors[3] = {&args.brightness, &args.contrast, &args.saturation};
      const char* names[3] = {"brightness", "contrast", "saturation"};
      for (int i = 0; i < 3; ++i) {
        const double v = P(p, names[i]).AsFloat();
        *factors[i] = static_cast<float>(rng.Uniform(std::max(0.0, 1.0 - v), 1.0 + v));
      }
    }
  }
  if (!rescaled) {
    args.y.taps = args.x.taps = 1;
    Rescale(ys, in_h, ys.n, args.y);
    Rescale(xs, in_w, xs.n, args.x);
  }
  const TensorType& out = chain.output;
  if (ys.n != out.dims[out.height_axis()] || xs.n != out.dims[out.width_axis()]) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "a " + std::to_string(in_h) + "x" + std::to_string(in_w) + " image gives " +
                         std::to_string(ys.n) + "x" + std::to_string(xs.n) + " through chain `" +
                         chain.symbol + "`, not its output " + out.ToString());
  }
  Finish(ys, args.y);
  Finish(xs, args.x);
  return args;
}

Result<RefTensor> ReferenceChain(const FusedChain& chain, const RefTensor& image, uint64_t seed,
                                 uint64_t epoch, uint64_t sample) {
  if (chain.steps.empty()) return image;
  // The first step reads `image` itself (no copy of the input).
  const RefTensor* in = &image;
  RefTensor cur;
  for (const ChainStep& step : chain.steps) {
    SampleRng rng(seed, epoch, sample, static_cast<uint32_t>(step.op_id));
    RefContext ctx{&rng};
    auto next = step.op->reference(*in, step.params, ctx);
    if (!next) return std::unexpected(next.error());
    cur = std::move(*next);
    in = &cur;
  }
  return cur;
}

}  // namespace sluice
