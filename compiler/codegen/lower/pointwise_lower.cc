// Halide lowerings of the pointwise ops (ops/pointwise_ops.cc): normalize,
// layout, cast.
#include "compiler/codegen/halide_dtype.h"
#include "compiler/codegen/lower/lowering.h"

namespace sluice::codegen_internal {
namespace {

using namespace Halide;

// (v / scale - mean) / std as the reference; in float (the reference's double
// result is rounded to float32 or narrower). Leaves float32 unless the input is
// already a float type.
Result<Expr> LowerNormalize(const LowerContext& ctx, TailState& s) {
  const ParamList& p = ctx.step->params;
  const auto& mean = p.at("mean").AsFloatList();
  const auto& sd = p.at("std").AsFloatList();
  const double scale = p.at("scale").AsFloat();
  Expr mv = static_cast<float>(mean[0]), sv = static_cast<float>(sd[0]);
  for (int i = 1; i < s.channels; ++i) {
    if (mean.size() > 1) mv = select(ctx.c == i, static_cast<float>(mean[i]), mv);
    if (sd.size() > 1) sv = select(ctx.c == i, static_cast<float>(sd[i]), sv);
  }
  if (!IsFloat(s.dtype)) s.dtype = DType::kFloat32;
  s.pre = (ctx.At(s.cur, ctx.c, ctx.x, ctx.y) * static_cast<float>(1.0 / scale) - mv) / sv;
  if (s.affine && static_cast<int>(s.affine->size()) == s.channels) {
    for (int i = 0; i < s.channels; ++i) {
      const double m = mean.size() > 1 ? mean[i] : mean[0];
      const double d = sd.size() > 1 ? sd[i] : sd[0];
      auto& [a, b] = (*s.affine)[i];
      a = a / scale / d;
      b = (b / scale - m) / d;
    }
  } else {
    s.affine.reset();
  }
  return RoundTo(s.dtype, s.pre);
}

// A storage order only: the values (and pre) are unchanged; the pipeline
// writes the chain's output in its layout.
Result<Expr> LowerLayout(const LowerContext& ctx, TailState& s) {
  return ctx.At(s.cur, ctx.c, ctx.x, ctx.y);
}

Result<Expr> LowerCast(const LowerContext& ctx, TailState& s) {
  const std::string& name = ctx.step->params.at("dtype").AsString();
  auto parsed = ParseDType(name);
  if (!parsed) return MakeError(ErrorCode::kInternal, "`cast` to unknown dtype `" + name + "`");
  const DType from = s.dtype;
  s.dtype = *parsed;
  // A cast that rounds to an integer type changes the values.
  if (!IsFloat(s.dtype) && IsFloat(from)) s.affine.reset();
  s.pre = ctx.At(s.cur, ctx.c, ctx.x, ctx.y);
  return RoundTo(s.dtype, s.pre);
}

}  // namespace

void RegisterPointwiseLowerings(LoweringTable& table) {
  table.emplace_back(FindOp("normalize"), LowerNormalize);
  table.emplace_back(FindOp("layout"), LowerLayout);
  table.emplace_back(FindOp("cast"), LowerCast);
}

}  // namespace sluice::codegen_internal
