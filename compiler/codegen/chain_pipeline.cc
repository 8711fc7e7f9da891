// One fused chain as a Halide pipeline.
//
// Stages (CPU schedule in brackets):
//   ytab/xtab   tap tables per axis: first window pixel and normalised weights of
//               every resampled-grid index, in double as ref::ResampleTaps, cast to
//               float at the end [compute_root; tiny]
//   vert(c, sx, oy)   vertical pass straight from the uint8 input rows: for output
//               row oy, sum over taps ky of wy * input row (first + ky), over the
//               source columns of the window [per output row; channel and column
//               fused and vectorised: dense loads of whole interleaved rows, no
//               gathers]
//   geom(c, ox, oy)   horizontal pass over vert, the fill outside the source
//               window and after the post-resize crops, rounded to uint8 as the
//               reference does [per block of 8 output columns and kRows output
//               rows: a banded weight matrix xmat over the block's source
//               columns, each block run only to its own band of nonzero
//               weights; per band column one weight load and one broadcast
//               FMA per row and channel, no gathers]
//   pointwise tail    each pointwise step's registered lowering
//               (compiler/codegen/lower/: color_jitter, grayscale, normalize,
//               layout, cast) inlined into the output, written in the
//               chain's layout and dtype (a float16 output is converted by
//               vcvtps2ph with Halide >= 21 on F16C targets, else by
//               Float16Bits)
// A chain without a rescaling op skips the tables and both passes: geom is an
// integer gather (exact).
// A step that needs its whole input (color_jitter's mean luma) sets
// TailState::whole_image, and geom is then computed for the whole output first.
#include "compiler/codegen/chain_pipeline.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "compiler/codegen/halide_dtype.h"
#include "compiler/codegen/lower/lowering.h"
#include "ops/fusion/kernel_abi.h"
#include "ops/fusion/sample_args.h"
#include "ops/reference/resample.h"

namespace sluice::codegen_internal {
namespace {

using namespace Halide;

// Output columns per horizontal-pass block (one AVX2 float vector).
constexpr int kBlock = 8;
// Vertical pass: values per chunk (8 AVX2 float vectors).
constexpr int kVChunk = 64;
// Output rows per horizontal band pass (CPU): kRows * 3 accumulators.
constexpr int kRows = 4;

struct AxisParams {
  Param<int32_t> flip, offset, valid_lo, valid_hi, resized, window_start, window, src_lo, src_hi,
      taps;
  explicit AxisParams(const std::string& a)
      : flip(a + "_flip"),
        offset(a + "_offset"),
        valid_lo(a + "_valid_lo"),
        valid_hi(a + "_valid_hi"),
        resized(a + "_resized"),
        window_start(a + "_window_start"),
        window(a + "_window"),
        src_lo(a + "_src_lo"),
        src_hi(a + "_src_hi"),
        taps(a + "_taps") {}
  void Append(std::vector<Argument>& args) const {
    for (const auto* p : {&flip, &offset, &valid_lo, &valid_hi, &resized, &window_start, &window,
                          &src_lo, &src_hi, &taps}) {
      args.push_back(*p);
    }
  }
};

Expr D(double v) { return Expr(v); }

Expr FilterFn(ref::Filter f, Expr x) {
  switch (f) {
    case ref::Filter::kBicubic: {
      const Expr a = D(-0.5);
      x = abs(x);
      return select(x < D(1.0), ((a + D(2.0)) * x - (a + D(3.0))) * x * x + D(1.0), x < D(2.0),
                    (((x - D(5.0)) * x + D(8.0)) * x - D(4.0)) * a, D(0.0));
    }
    case ref::Filter::kArea:
      return select(x > D(-0.5) && x <= D(0.5), D(1.0), D(0.0));
    default:
      x = abs(x);
      return select(x < D(1.0), D(1.0) - x, D(0.0));
  }
}

// Tap tables of one axis as ref::ResampleTaps(window, resized, filter, antialias).
struct Taps {
  Func first, weight;
};

Taps MakeTaps(const AxisParams& a, ref::Filter filter, bool antialias, const std::string& name) {
  Var r("r"), k("k");
  Taps t{Func(name + "_first"), Func(name + "_weight")};
  Expr scale = cast<double>(a.window) / cast<double>(a.resized);
  Expr rd = cast<double>(r);
  if (filter == ref::Filter::kNearest) {
    t.first(r) = min(cast<int>(floor(rd * scale)), a.window - 1);
    t.weight(k, r) = select(k == 0, 1.0f, 0.0f);
  } else {
    const double base = filter == ref::Filter::kBicubic ? 2.0
                        : filter == ref::Filter::kArea  ? 0.5
                                                        : 1.0;
    Expr fs = antialias ? max(Expr(1.0), scale) : Expr(1.0);
    Expr support = D(base) * fs;
    Expr center = (rd + D(0.5)) * scale;
    Func lo(name + "_lo"), hi(name + "_hi");
    lo(r) = max(0, cast<int>(center - support + D(0.5)));
    hi(r) = min(a.window, cast<int>(center + support + D(0.5)));
    // Divisions by fs and by the total are multiplications by reciprocals
    // computed once (a vector double division costs ~10x a multiply); the
    // weights can differ from ref::ResampleTaps in the last double bit, far
    // below their float precision.
    Expr inv_fs = D(1.0) / fs;
    Func raw(name + "_raw");
    raw(k, r) =
        select(lo(r) + k < hi(r),
               FilterFn(filter, (cast<double>(lo(r) + k) - center + D(0.5)) * inv_fs), D(0.0));
    RDom kk(0, a.taps, name + "_kk");
    Func total(name + "_total"), inv_total(name + "_inv_total");
    total(r) = D(0.0);
    total(r) += raw(kk, r);
    inv_total(r) = D(1.0) / total(r);
    t.first(r) = select(total(r) != D(0.0), lo(r), clamp(cast<int>(center), 0, a.window - 1));
    t.weight(k, r) = cast<float>(
        select(total(r) != D(0.0), raw(k, r) * inv_total(r), select(k == 0, D(1.0), D(0.0))));
    // The double filter math is the bulk of the per-call table cost: evaluated
    // once per (tap, index), vectorised over r (4 doubles), stored r-innermost.
    raw.compute_root().reorder(r, k).reorder_storage(r, k).vectorize(r, 4);
    total.compute_root().vectorize(r, 4);
    total.update().vectorize(r, 4);
    inv_total.compute_root().vectorize(r, 4);
    t.weight.compute_root().reorder(r, k).reorder_storage(r, k).vectorize(r, 4);
  }
  if (filter == ref::Filter::kNearest) t.weight.compute_root();
  t.first.compute_root();
  return t;
}

// Output index o -> o' (after the final flip).
Expr Flipped(const AxisParams& a, Expr o, int64_t out) {
  return select(a.flip != 0, static_cast<int>(out - 1) - o, o);
}
Expr Valid(const AxisParams& a, Expr o_flipped) {
  return o_flipped >= a.valid_lo && o_flipped < a.valid_hi;
}
// Source index of window pixel j, clamped into the source range (and the image).
Expr ClampedSource(const AxisParams& a, Expr j, Expr image_extent) {
  Expr s = a.window_start + j;
  return clamp(clamp(s, a.src_lo, max(a.src_lo, a.src_hi - 1)), 0, image_extent - 1);
}
Expr InSource(const AxisParams& a, Expr j) {
  Expr s = a.window_start + j;
  return s >= a.src_lo && s < a.src_hi;
}

// float32 -> IEEE float16 bits, round to nearest even (subnormals, overflow to
// inf and NaN as the hardware conversion). Written out because Halide 14 lowers
// a float16 cast on x86 to a longer emulation (it emits no vcvtps2ph even with
// F16C); this one is integer adds and shifts plus one float round for the
// subnormal range, with a single narrowing at the end.
Expr Float16Bits(Expr v) {
  // In int32 (a is below 2^31 once the sign is cleared): AVX2 has no unsigned
  // compares or float -> uint32 conversion.
  Expr u = reinterpret(Int(32), v);
  Expr a = u & 0x7fffffff;
  Expr sign = (u >> 16) & 0x8000;
  // Normal range: drop 13 mantissa bits with round-to-nearest-even and rebias
  // the exponent (a carry out of the largest finite value gives exactly inf).
  Expr norm = ((a + 0xfff + ((a >> 13) & 1)) >> 13) - (112 << 10);
  // |v| < 2^-14: a multiple of 2^-24 (exact scaling), rounded half to even.
  Expr sub = cast<int32_t>(round(abs(v) * 16777216.0f));
  Expr h = select(a<0x38800000, sub, a> 0x7f800000, 0x7e00, a >= 0x47800000, 0x7c00, norm);
  return cast<uint16_t>(h | sign);
}

// True when every value a * u + b (u = 0..255, per channel) is a normal float16
// with margin: |v| in [2^-13, 65000]. Then the output conversion needs neither
// the subnormal nor the inf/NaN branch (float error on such values stays far
// from both limits).
bool NormalHalfRange(const std::vector<std::pair<double, double>>& affine) {
  for (const auto& [a, b] : affine) {
    for (int u = 0; u < 256; ++u) {
      const double v = std::abs(a * u + b);
      if (!(v >= 1.0 / 8192.0 && v <= 65000.0)) return false;
    }
  }
  return true;
}

// Float16Bits for a value known to be a normal float16 (NormalHalfRange): the
// exponent is rebiased by an exact float multiply by 2^-112, then the mantissa
// rounded to nearest even in the integer bits; 10 vector ops instead of ~18.
// The same for a value already multiplied by 2^-112.
Expr Float16BitsRebiased(Expr scaled) {
  Expr u = reinterpret(Int(32), scaled);
  Expr r = u + 0xfff + ((u >> 13) & 1);
  return cast<uint16_t>(((r >> 13) & 0x7fff) | ((u >> 16) & 0x8000));
}
Expr Float16BitsNormal(Expr v) { return Float16BitsRebiased(v * 0x1p-112f); }

const ParamValue& P(const ParamList& p, const std::string& name) { return p.at(name); }

// The pipeline's inputs (exactly the kernel ABI) and the chain's shape: what
// every stage below reads.
struct ChainInputs {
  int in_c = 0, out_c = 0;
  int64_t out_h = 0, out_w = 0;
  ImageParam in{UInt(8), 3, "in"};
  AxisParams ya{"y"}, xa{"x"};
  Param<float> fill{"fill"};
  // The draw slots (kernel_abi.h): each random pointwise step reads its own,
  // at DrawSlotOffset; scalars, so loop invariants.
  std::vector<Param<float>> draw_params;
  std::vector<Expr> draws;
  Var c{"c"}, x{"x"}, y{"y"}, sx{"sx"};
  Expr in_w, in_h;

  explicit ChainInputs(const FusedChain& chain) {
    const TensorType& ot = chain.output;
    in_c = static_cast<int>(chain.input.dims[2]);
    out_h = ot.dims[ot.height_axis()];
    out_w = ot.dims[ot.width_axis()];
    out_c = static_cast<int>(ot.dims[ot.channel_axis()]);
    for (int i = 0; i < kMaxDrawSlots; ++i) {
      draw_params.emplace_back("draw" + std::to_string(i));
      draws.push_back(draw_params.back());
    }
    in_w = in.dim(1).extent();
    in_h = in.dim(2).extent();
  }
};

// The resampled image geom(c, x, y) (uint8 values as float) and the stages
// the schedule places: passes[0] the vertical pass and passes[1] the
// horizontal one (CPU), or passes[1] the 2-D tap product (GPU); none without
// a rescaling step.
struct Resampled {
  Func geom{"geom"};
  std::vector<Func> passes;
  RDom hband;  // the CPU horizontal pass's band loop
};

// The per-output tap tables of the CPU passes (see CpuTapTables).
struct CpuTables {
  Var k{"k"}, o{"o"};
  Func yrow{"yrow"}, yw{"yw"}, yfw{"yfw"}, xcol{"xcol"}, xw{"xw"}, xfw{"xfw"};
  Expr col_lo, col_hi;  // source columns the horizontal pass can touch
};

// Per output coordinate and tap (after flip, offset and clamping): the source
// row / column, its weight (0 for a tap on padding) and the weight that falls
// on padding (times `fill`). Tiny; computed once per call.
void CpuTapTables(const ChainInputs& ci, const Taps& yt, const Taps& xt, CpuTables& t) {
  const AxisParams &ya = ci.ya, &xa = ci.xa;
  const Var &k = t.k, &o = t.o;
  RDom kyr(0, ya.taps, "kyr"), kxr(0, xa.taps, "kxr");
  Expr ryo = clamp(Flipped(ya, o, ci.out_h) + ya.offset, 0, max(ya.resized - 1, 0));
  Expr rxo = clamp(Flipped(xa, o, ci.out_w) + xa.offset, 0, max(xa.resized - 1, 0));
  // Source columns the horizontal pass can touch: the window clamped into
  // the source range (a tap outside it has weight 0).
  t.col_lo = ClampedSource(xa, 0, ci.in_w);
  t.col_hi = ClampedSource(xa, max(xa.window - 1, 0), ci.in_w);
  // The valid range (after the post-resize crops) is folded into the tables:
  // an output row / column outside it gets all-zero tap weights and `fill`
  // as its padding term, so the passes produce exactly `fill` there (an
  // integer, reproduced exactly by the rounding below) and the output needs
  // no per-pixel select.
  Expr yvalid = Valid(ya, Flipped(ya, o, ci.out_h));
  Expr xvalid = Valid(xa, Flipped(xa, o, ci.out_w));
  const Expr& fill = ci.fill;
  t.yrow(k, o) = ClampedSource(ya, yt.first(ryo) + k, ci.in_h);
  t.yw(k, o) = select(yvalid && InSource(ya, yt.first(ryo) + k), yt.weight(k, ryo), 0.0f);
  t.yfw(o) = select(yvalid, 0.0f, fill);
  t.yfw(o) +=
      select(yvalid && !InSource(ya, yt.first(ryo) + kyr), yt.weight(kyr, ryo), 0.0f) * fill;
  t.xcol(k, o) = clamp(ClampedSource(xa, xt.first(rxo) + k, ci.in_w), t.col_lo, t.col_hi);
  t.xw(k, o) = select(xvalid && InSource(xa, xt.first(rxo) + k), xt.weight(k, rxo), 0.0f);
  t.xfw(o) = select(xvalid, 0.0f, fill);
  t.xfw(o) +=
      select(xvalid && !InSource(xa, xt.first(rxo) + kxr), xt.weight(kxr, rxo), 0.0f) * fill;
  // Vectorised over the output coordinate (stored o-innermost).
  for (Func* f : {&t.yrow, &t.yw, &t.xcol, &t.xw}) {
    f->compute_root().reorder_storage(o, k).reorder(o, k).vectorize(o, 8,
                                                                    TailStrategy::GuardWithIf);
  }
  for (Func* f : {&t.yfw, &t.xfw}) {
    f->compute_root().vectorize(o, 8, TailStrategy::GuardWithIf);
    f->update().vectorize(o, 8, TailStrategy::GuardWithIf);
  }
  const int out_w = static_cast<int>(ci.out_w);
  t.xcol.bound(o, 0, out_w);
  t.xw.bound(o, 0, out_w);
  t.xfw.bound(o, 0, out_w);
}

// The vertical pass: for output row y, the source columns of the window, from
// the uint8 rows (channels and columns fused: dense loads, no selects).
// vflat(i, y) holds channel i % 3 of column i / 3 (interleaved, as the input
// rows): a flat index keeps loads and stores dense vectors.
struct VerticalPass {
  RDom ky;
  Var i{"i"}, io{"io"}, ii{"ii"}, iu{"iu"}, iv{"iv"};
  Func vflat{"vflat"}, vsum{"vsum"};
};

void DefineVerticalPass(const ChainInputs& ci, const CpuTables& t, VerticalPass& v) {
  v.ky = RDom(0, ci.ya.taps, "ky");
  const Var &i = v.i, &y = ci.y;
  v.vsum(i, y) = t.yfw(y);
  v.vsum(i, y) += t.yw(v.ky, y) * cast<float>(ci.in(i % ci.in_c, i / ci.in_c, t.yrow(v.ky, y)));
  v.vflat(i, y) = v.vsum(i, y);
}

// Taps innermost over kVChunk values at a time (vsum, per chunk of vflat):
// 8 vector accumulators stay in registers across the taps (independent FMA
// chains; the row index is computed once per tap and chunk). vflat is pure,
// so its last chunk is shifted inwards (recomputed, not guarded): no partial
// vectors, whose masked uint8 loads AVX2 would scalarise. That needs at least
// kVChunk values in the row's range; narrower windows keep the guarded
// schedule.
void ScheduleVerticalPass(const ChainInputs& ci, const CpuTables& t, VerticalPass& v) {
  Expr vals = (t.col_hi - t.col_lo + 1) * ci.in_c;
  v.vflat.specialize(vals >= kVChunk)
      .split(v.i, v.io, v.ii, kVChunk, TailStrategy::ShiftInwards)
      .split(v.ii, v.iu, v.iv, 8)
      .vectorize(v.iv)
      .unroll(v.iu);
  v.vflat.split(v.i, v.io, v.ii, kVChunk, TailStrategy::GuardWithIf)
      .split(v.ii, v.iu, v.iv, 8, TailStrategy::GuardWithIf)
      .vectorize(v.iv);
  v.vsum.compute_at(v.vflat, v.io);
  v.vsum.split(v.i, v.iu, v.iv, 8, TailStrategy::GuardWithIf).vectorize(v.iv).unroll(v.iu);
  v.vsum.update()
      .split(v.i, v.iu, v.iv, 8, TailStrategy::GuardWithIf)
      .reorder(v.iv, v.iu, v.ky)
      .vectorize(v.iv)
      .unroll(v.iu);
}

// The horizontal pass without gathers, into hpart(c, x, y) from vert(c, sx, y):
// per block of kBlock output columns, a banded weight matrix over the source
// columns the block touches. xbase(b) is the first source column of block b;
// xmat(x, s) the weight of output column x on source column
// xbase(x / kBlock) + s (taps summed, 0 off the band); `span` bounds the band
// width of every block: the first taps of kBlock consecutive outputs are at
// most ceil((kBlock - 1) * scale) + 1 apart, plus `taps` (clamping the
// columns only narrows the band; one more for the degenerate first =
// int(center) case). The pass is then, per band column s, one dense load of
// kBlock weights, a broadcast of the row buffer value and one multiply-add per
// channel. Returns the band loop (for the schedule).
RDom DefineHorizontalPass(const ChainInputs& ci, const CpuTables& t, Func vert, Func hpart) {
  const AxisParams& xa = ci.xa;
  const Var &o = t.o, &c = ci.c, &x = ci.x, &y = ci.y;
  const Expr &col_lo = t.col_lo, &col_hi = t.col_hi;
  const int out_w = static_cast<int>(ci.out_w);
  Var b("b"), s("s");
  const int nblocks = (out_w + kBlock - 1) / kBlock;
  Expr xscale = cast<double>(xa.window) / cast<double>(max(xa.resized, 1));
  Expr span = min(cast<int>(ceil(D(kBlock - 1) * xscale)) + xa.taps + 2, col_hi - col_lo + 1);
  // The band starts at or before the block's first tap of nonzero weight
  // and ends at or before col_hi (shifted left if needed; `span` is at most
  // the column count), so xbase(b) + s stays in [col_lo, col_hi] without a
  // clamp in the loop.
  Func xbase("xbase"), xmat("xmat");
  // First source column of nonzero weight of each output (col_hi if none)
  // and its minimum over each block.
  Func xfirst("xfirst"), bfirst("bfirst");
  RDom kf(0, xa.taps, "kf"), rk(0, kBlock, "rk");
  xfirst(o) = col_hi;
  xfirst(o) = min(xfirst(o), select(t.xw(kf, o) != 0.0f, t.xcol(kf, o), col_hi));
  xfirst.compute_root().bound(o, 0, out_w);
  bfirst(b) = col_hi;
  bfirst(b) = min(bfirst(b), xfirst(min(b * kBlock + rk, out_w - 1)));
  bfirst.compute_root().bound(b, 0, nblocks);
  xbase(b) = max(col_lo, min(bfirst(b), col_hi + 1 - span));
  xbase.compute_root().bound(b, 0, nblocks);
  // The band each block actually needs (<= span): over the block's outputs
  // and taps of nonzero weight, the column's offset from the block's base,
  // plus one. The band loop runs to it (an RDom extent cannot call a Func;
  // a `where` on the band's RVar with a bound invariant in the band loop
  // becomes its loop bound).
  Func bspan("bspan");
  RDom bt(0, xa.taps, 0, kBlock, "bt");
  Expr bo = min(b * kBlock + bt.y, out_w - 1);
  bspan(b) = 1;
  bspan(b) = max(bspan(b), select(t.xw(bt.x, bo) != 0.0f, t.xcol(bt.x, bo) - xbase(b) + 1, 1));
  bspan.compute_root().bound(b, 0, nblocks);
  RDom kx(0, xa.taps, "kx");
  Expr oc = min(o, out_w - 1);
  xmat(o, s) = 0.0f;
  xmat(o, s) += select(t.xcol(kx, oc) == xbase(o / kBlock) + s, t.xw(kx, oc), 0.0f);
  xmat.compute_root().bound(o, 0, nblocks * kBlock);
  xmat.vectorize(o, kBlock);
  xmat.update().reorder(o, kx, s).vectorize(o, kBlock);
  // The band loop is computed for kRows output rows at once (the schedule):
  // each weight-vector load and column index serves kRows * in_c FMAs, and
  // those are independent chains (no partial sums needed).
  RDom band(0, span, "band");
  band.where(band < bspan(x / kBlock));
  Expr col = unsafe_promise_clamped(xbase(x / kBlock) + band, col_lo, col_hi);
  hpart(c, x, y) = t.xfw(x);
  hpart(c, x, y) += xmat(x, band) * vert(c, col, y);
  return band;
}

// geom without a rescaling step: an integer gather (exact).
void Gather(const ChainInputs& ci, Resampled& r, Expr valid, Expr ry, Expr rx) {
  const AxisParams &ya = ci.ya, &xa = ci.xa;
  Expr v = select(
      InSource(ya, ry) && InSource(xa, rx),
      cast<float>(ci.in(ci.c, ClampedSource(xa, rx, ci.in_w), ClampedSource(ya, ry, ci.in_h))),
      ci.fill);
  r.geom(ci.c, ci.x, ci.y) = select(valid, v, ci.fill);
}

// The resampling passes and geom (see the file comment).
Resampled Resample(const ChainInputs& ci, const ChainStep* rescale, bool gpu) {
  const AxisParams &ya = ci.ya, &xa = ci.xa;
  const Var &c = ci.c, &x = ci.x, &y = ci.y;
  Expr oyf = Flipped(ya, y, ci.out_h), oxf = Flipped(xa, x, ci.out_w);
  Expr valid = Valid(ya, oyf) && Valid(xa, oxf);
  Expr ry = clamp(oyf + ya.offset, 0, max(ya.resized - 1, 0));
  Expr rx = clamp(oxf + xa.offset, 0, max(xa.resized - 1, 0));

  Resampled r;
  Func vert("vert");
  Taps yt, xt;
  if (!rescale) {
    Gather(ci, r, valid, ry, rx);
    return r;
  }
  const ref::Filter filter = ref::ParseFilter(P(rescale->params, "interpolation").AsString());
  const bool aa = P(rescale->params, "antialias").AsBool();
  yt = MakeTaps(ya, filter, aa, "ytab");
  xt = MakeTaps(xa, filter, aa, "xtab");
  Func acc("hacc"), hpart("hpart");
  if (gpu) {
    // One thread per output pixel: the 2-D tap product directly (no row buffer).
    RDom k2(0, xa.taps, 0, ya.taps, "k2");
    Expr jx = xt.first(rx) + k2.x, jy = yt.first(ry) + k2.y;
    Expr px = select(
        InSource(xa, jx) && InSource(ya, jy),
        cast<float>(ci.in(c, ClampedSource(xa, jx, ci.in_w), ClampedSource(ya, jy, ci.in_h))),
        ci.fill);
    acc(c, x, y) = 0.0f;
    acc(c, x, y) += xt.weight(k2.x, rx) * yt.weight(k2.y, ry) * px;
  } else {
    CpuTables tables;
    CpuTapTables(ci, yt, xt, tables);
    VerticalPass v;
    DefineVerticalPass(ci, tables, v);
    vert(c, ci.sx, y) = v.vflat(ci.sx * ci.in_c + c, y);
    r.hband = DefineHorizontalPass(ci, tables, vert, hpart);
    acc(c, x, y) = hpart(c, x, y);
    ScheduleVerticalPass(ci, tables, v);
    vert = v.vflat;  // the stage the schedule places per output row
    hpart.bound(c, 0, ci.in_c);
  }
  if (gpu) {
    r.geom(c, x, y) = select(valid, RoundTo(DType::kUInt8, acc(c, x, y)), ci.fill);
  } else if (filter == ref::Filter::kBicubic) {
    r.geom(c, x, y) = RoundTo(DType::kUInt8, acc(c, x, y));
  } else {
    // Non-negative weights that sum to 1: the value is already within
    // [0, 255] up to float error, which round() absorbs (no clamp).
    r.geom(c, x, y) = round(acc(c, x, y));
  }
  r.passes = {vert, gpu ? acc : hpart};
  return r;
}

// Pointwise tail on geom, tracking dtype and channels as the reference: each
// step's registered lowering (compiler/codegen/lower/).
Result<TailState> LowerTail(const FusedChain& chain, const ChainInputs& ci, const Func& geom) {
  TailState tail;
  tail.cur = geom;
  tail.dtype = DType::kUInt8;
  tail.channels = ci.in_c;
  // The value of cur(c, x, y) before its last rounding (what the float16
  // output conversion rounds itself).
  tail.pre = geom(ci.c, ci.x, ci.y);
  // While the tail is a per-channel affine map of geom's value (an integer in
  // [0, 255]): lets the float16 conversion drop the branches no such value
  // can take.
  tail.affine = std::vector<std::pair<double, double>>(ci.in_c, {1.0, 0.0});
  int slot = 0;
  for (const ChainStep& s : chain.steps) {
    if (s.op->fusion != FusionRole::kPointwise) continue;
    LowerContext ctx;
    ctx.step = &s;
    ctx.c = ci.c;
    ctx.x = ci.x;
    ctx.y = ci.y;
    ctx.width = static_cast<int>(ci.out_w);
    ctx.height = static_cast<int>(ci.out_h);
    ctx.name = s.op->name + "_" + std::to_string(s.op_id);
    for (int i = 0; i < s.op->draw_slots; ++i) ctx.draws.push_back(ci.draws[slot + i]);
    slot += s.op->draw_slots;
    SLUICE_RETURN_IF_ERROR(LowerStep(ctx, tail));
  }
  const TensorType& ot = chain.output;
  if (tail.channels != ci.out_c || tail.dtype != ot.dtype) {
    return MakeError(ErrorCode::kInternal, "chain `" + chain.symbol + "` computes " +
                                               std::string(DTypeName(tail.dtype)) + " x" +
                                               std::to_string(tail.channels) +
                                               " but its output type is " + ot.ToString());
  }
  return tail;
}

// The output value in the chain's dtype. A CPU float16 output is converted
// here (see Float16Bits); the rest is a cast.
Expr OutputValue(const FusedChain& chain, const ChainInputs& ci, const Func& geom,
                 const TailState& tail, bool gpu, const Halide::Target& target) {
  const TensorType& ot = chain.output;
  const Var& c = ci.c;
  Expr value = cast(HalideType(ot.dtype), tail.cur(c, ci.x, ci.y));
  if (gpu || ot.dtype != DType::kFloat16) return value;
  const auto& affine = tail.affine;
  if (affine && NormalHalfRange(*affine) && static_cast<int>(affine->size()) == ci.out_c) {
    // The whole tail is geom's value u times a per-channel affine map: one
    // multiply-add of u with the folded constants, pre-scaled by the
    // Float16BitsNormal rebias 2^-112 (exact: a power of two, and the scaled
    // values stay normal float32), then the integer rounding. May differ from
    // the step-by-step float result by one float16 ulp (within tolerance).
    // u * A[c] + B[c] with the per-channel constants times `scale`.
    auto affine_of_u = [&](double scale) {
      Expr a = static_cast<float>((*affine)[0].first * scale);
      Expr b = static_cast<float>((*affine)[0].second * scale);
      for (int i = 1; i < ci.out_c; ++i) {
        a = select(c == i, static_cast<float>((*affine)[i].first * scale), a);
        b = select(c == i, static_cast<float>((*affine)[i].second * scale), b);
      }
      return geom(c, ci.x, ci.y) * a + b;
    };
    // Halide 21 lowers a float16 cast to vcvtps2ph on F16C targets (Halide
    // 14 emulates it, hence the integer rounding): the same single
    // multiply-add, then the hardware conversion (round to nearest even).
    bool hardware_half = false;
#if defined(HALIDE_VERSION_MAJOR) && HALIDE_VERSION_MAJOR >= 21
    hardware_half = target.has_feature(Target::F16C);
#else
    (void)target;
#endif
    return hardware_half ? cast(Float(16), affine_of_u(1.0))
                         : reinterpret(Float(16), Float16BitsRebiased(affine_of_u(0x1p-112)));
  }
  return reinterpret(Float(16), affine && NormalHalfRange(*affine) ? Float16BitsNormal(tail.pre)
                                                                   : Float16Bits(tail.pre));
}

// CPU schedule: per group of kRows output rows, the vertical pass over the
// window's columns; per vector of 8 output columns, the horizontal pass for
// all rows of the group and channels (kRows * 3 accumulators in registers),
// then the pointwise tail and the stores. `anchor` is geom when it is
// computed whole (root_geom), else the output.
void ScheduleCpu(const ChainInputs& ci, Resampled& r, Func out, Func anchor, bool root_geom,
                 bool chw, bool rescale) {
  const Var &c = ci.c, &x = ci.x, &y = ci.y;
  Func& geom = r.geom;
  Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
  // kRows output rows per step of the row loop (ShiftInwards: the anchor is
  // pure, a last odd row pair is recomputed); the passes run per row group.
  const bool rows = rescale && ci.out_h >= kRows;
  if (root_geom) {
    geom.bound(c, 0, ci.in_c).split(x, xo, xi, kBlock, TailStrategy::GuardWithIf);
    if (rows) {
      geom.split(y, yo, yi, kRows, TailStrategy::ShiftInwards).reorder(xi, c, yi, xo, yo);
    } else {
      geom.reorder(xi, c, xo, y);
    }
    geom.unroll(c).vectorize(xi);
  }
  out.bound(c, 0, ci.out_c).split(x, xo, xi, kBlock, TailStrategy::GuardWithIf);
  const bool split_out = rows && !root_geom;
  if (split_out) out.split(y, yo, yi, kRows, TailStrategy::ShiftInwards);
  if (chw) {
    if (split_out) {
      out.reorder(xi, c, yi, xo, yo);
    } else {
      out.reorder(xi, c, xo, y);
    }
  } else {
    if (split_out) {
      out.reorder(c, xi, yi, xo, yo);
    } else {
      out.reorder(c, xi, xo, y);
    }
  }
  out.unroll(c).vectorize(xi);
  // The row group unrolled too: every access to the horizontal pass's
  // accumulators has a constant index, so they stay in registers from the
  // band loop to the stores (no round trip through the stack).
  if (split_out) out.unroll(yi);
  if (!rescale) return;
  Func& hacc = r.passes[1];
  const Var& ry_loop = rows ? yo : y;
  // Allocated once (folded), filled per row group.
  r.passes[0].compute_at(anchor, ry_loop).store_root();
  hacc.compute_at(anchor, xo).reorder_storage(x, c, y);
  hacc.reorder(x, c, y).vectorize(x, kBlock, TailStrategy::GuardWithIf).unroll(c);
  hacc.update().reorder(x, c, y, r.hband).vectorize(x, kBlock, TailStrategy::GuardWithIf).unroll(c);
  if (rows) {
    hacc.unroll(y);
    hacc.update().unroll(y);
  }
}

}  // namespace

Result<ChainPipeline> BuildChainPipeline(const FusedChain& chain, bool gpu,
                                         const Halide::Target& target) {
  SLUICE_RETURN_IF_ERROR(CheckFusable(chain));
  ChainInputs ci(chain);
  const Var &c = ci.c, &x = ci.x, &y = ci.y;
  // The rescaling step, if any.
  const ChainStep* rescale = nullptr;
  for (const ChainStep& s : chain.steps) {
    if (s.op->fusion == FusionRole::kGeometry && s.op->geometry.rescales) rescale = &s;
  }
  Resampled r = Resample(ci, rescale, gpu);
  auto tail = LowerTail(chain, ci, r.geom);
  if (!tail) return std::unexpected(tail.error());

  const TensorType& ot = chain.output;
  Func out(gpu ? chain.symbol + kCudaSuffix : chain.symbol);
  const bool chw = ot.layout == Layout::kCHW;
  Expr value = OutputValue(chain, ci, r.geom, *tail, gpu, target);
  if (chw) {
    out(x, y, c) = value;
  } else {
    out(c, x, y) = value;
  }
  // Dense output of static extents in the chain's layout.
  SetDenseSampleBounds(out.output_buffer(), chw, static_cast<int>(ci.out_w),
                       static_cast<int>(ci.out_h), ci.out_c);
  ci.in.dim(0).set_bounds(0, ci.in_c).set_stride(1);
  ci.in.dim(1).set_stride(ci.in_c);

  // geom is computed whole (color_jitter's mean) or inlined into the output; the
  // resampling passes run per output row (CPU) or per output pixel (GPU) of it.
  const bool root_geom = tail->whole_image;
  Func anchor = root_geom ? r.geom : out;
  if (root_geom) {
    r.geom.compute_root();
    for (Func& f : tail->roots) f.compute_root();
  }
  if (gpu) {
    Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
    if (root_geom) r.geom.gpu_tile(x, y, xo, yo, xi, yi, 16, 16);
    out.gpu_tile(x, y, xo, yo, xi, yi, 16, 16);
    if (rescale) r.passes[1].compute_at(anchor, xi);
  } else {
    ScheduleCpu(ci, r, out, anchor, root_geom, chw, rescale != nullptr);
  }

  ChainPipeline result{Pipeline(out), {}};
  result.args.push_back(ci.in);
  ci.ya.Append(result.args);
  ci.xa.Append(result.args);
  result.args.push_back(ci.fill);
  for (const Param<float>& d : ci.draw_params) result.args.push_back(d);
  return result;
}

}  // namespace sluice::codegen_internal
