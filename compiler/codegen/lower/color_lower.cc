// Halide lowerings of the colour ops (ops/color_ops.cc): color_jitter, grayscale.
#include "compiler/codegen/halide_dtype.h"
#include "compiler/codegen/lower/lowering.h"

namespace sluice::codegen_internal {
namespace {

using namespace Halide;

Expr D(double v) { return Expr(v); }

// ITU-R 601 luma of f at (x, y) in double; a 1-channel image is its own luma.
Expr Luma(const LowerContext& ctx, const Func& f, int channels, Expr x, Expr y) {
  if (channels == 1) return cast<double>(ctx.At(f, 0, x, y));
  return D(0.299) * cast<double>(ctx.At(f, 0, x, y)) + D(0.587) * cast<double>(ctx.At(f, 1, x, y)) +
         D(0.114) * cast<double>(ctx.At(f, 2, x, y));
}

// Draw slots: brightness, contrast, saturation factors. Needs the mean luma of
// the whole image after brightness, so the image is computed whole first.
Result<Expr> LowerColorJitter(const LowerContext& ctx, TailState& s) {
  if (ctx.draws.size() != 3) {
    return MakeError(ErrorCode::kInternal, "color_jitter lowering needs 3 draw slots");
  }
  const Expr& brightness = ctx.draws[0];
  const Expr& contrast = ctx.draws[1];
  const Expr& saturation = ctx.draws[2];
  const Var &c = ctx.c, &x = ctx.x, &y = ctx.y;
  const float bound = s.dtype == DType::kUInt8 ? 255.0f : 1.0f;
  s.whole_image = true;
  Func b1(ctx.name + "_b");
  b1(ctx.Args()) = clamp(brightness * ctx.At(s.cur, c, x, y), 0.0f, bound);
  RDom all(0, ctx.width, 0, ctx.height, ctx.name + "_all");
  Func mean(ctx.name + "_mean");
  mean(ctx.BatchArgs()) = cast<double>(0);
  mean(ctx.BatchArgs()) += Luma(ctx, b1, s.channels, all.x, all.y);
  Expr m = cast<float>(mean(ctx.BatchArgs()) / D(static_cast<double>(ctx.width) * ctx.height));
  s.roots.push_back(mean);
  Func c2(ctx.name + "_c");
  c2(ctx.Args()) = clamp(contrast * ctx.At(b1, c, x, y) + (1.0f - contrast) * m, 0.0f, bound);
  Expr v;
  if (s.channels == 3) {
    Expr l = cast<float>(Luma(ctx, c2, 3, x, y));
    v = clamp(saturation * ctx.At(c2, c, x, y) + (1.0f - saturation) * l, 0.0f, bound);
  } else {
    v = ctx.At(c2, c, x, y);
  }
  s.pre = v;
  s.affine.reset();
  return RoundTo(s.dtype, v);
}

Result<Expr> LowerGrayscale(const LowerContext& ctx, TailState& s) {
  const int n = static_cast<int>(ctx.step->params.at("num_output_channels").AsInt());
  Expr l = s.channels == 1 ? ctx.At(s.cur, 0, ctx.x, ctx.y)
                           : cast<float>(Luma(ctx, s.cur, s.channels, ctx.x, ctx.y));
  s.pre = l;
  s.channels = n;
  s.affine.reset();
  return RoundTo(s.dtype, l);
}

}  // namespace

void RegisterColorLowerings(LoweringTable& table) {
  table.emplace_back(FindOp("color_jitter"), LowerColorJitter);
  table.emplace_back(FindOp("grayscale"), LowerGrayscale);
}

}  // namespace sluice::codegen_internal
