// Split fusion groups: the CPU part as a chain of its own, and the batch-wide
// CUDA pipeline of the pointwise tail (see gpu_batch_pipeline.h).
//
// The tail calls the same per-op lowerings (compiler/codegen/lower/) as the
// per-sample pipelines' pointwise tail (chain_pipeline.cc): the staging image
// holds exactly the uint8 values the whole-chain kernel has at the cut (its
// resampling rounds to uint8, and every op before the cut keeps uint8), so
// running the same expressions on them gives the whole chain's output.
#include "compiler/codegen/gpu_batch_pipeline.h"

#include <string>

#include "compiler/codegen/halide_dtype.h"
#include "compiler/codegen/lower/lowering.h"
#include "ops/fusion/gpu_staging.h"
#include "ops/fusion/kernel_abi.h"
#include "ops/fusion/sample_args.h"

namespace sluice {
namespace {

using namespace Halide;
using codegen_internal::HalideType;
using codegen_internal::LowerContext;
using codegen_internal::LowerStep;
using codegen_internal::TailState;

// The type after steps [0, gpu_from), by the ops' type rules.
Result<TensorType> TypeAtCut(const FusedChain& chain) {
  TensorType t = chain.input;
  for (int i = 0; i < chain.gpu_from; ++i) {
    const ChainStep& s = chain.steps[i];
    if (!s.op->infer)
      return MakeError(ErrorCode::kInternal, "`" + s.op->name + "` has no type rule");
    auto out = s.op->infer(std::span<const TensorType>(&t, 1), s.params);
    if (!out) return std::unexpected(out.error());
    if (out->size() != 1) {
      return MakeError(ErrorCode::kUnsupported, "chain `" + chain.symbol + "`: `" + s.op->name +
                                                    "` does not give one output");
    }
    t = (*out)[0];
  }
  return t;
}

}  // namespace

Status CheckGpuSplit(const FusedChain& chain) {
  const int n = static_cast<int>(chain.steps.size());
  if (chain.gpu_from <= 0 || chain.gpu_from >= n) {
    return MakeError(ErrorCode::kUnsupported,
                     "chain `" + chain.symbol + "`: gpu_from " + std::to_string(chain.gpu_from) +
                         " does not split its " + std::to_string(n) +
                         " steps (the CPU part needs the resampling steps, the GPU part at "
                         "least one op)");
  }
  for (int i = chain.gpu_from; i < n; ++i) {
    if (!chain.steps[i].op->gpu_batch) {
      return MakeError(ErrorCode::kUnsupported,
                       "chain `" + chain.symbol + "`: step " + std::to_string(i) + " (`" +
                           chain.steps[i].op->name +
                           "`) cannot run on the GPU batch-wide (only deterministic pointwise "
                           "ops with a batch-wide lowering can: OpDef::gpu_batch)");
    }
  }
  // The staging image (the type after step gpu_from - 1) must be uint8 HWC.
  auto staged = TypeAtCut(chain);
  if (!staged) return std::unexpected(staged.error());
  if (staged->dtype != DType::kUInt8 || staged->layout != Layout::kHWC) {
    const int i = chain.gpu_from - 1;
    return MakeError(ErrorCode::kUnsupported,
                     "chain `" + chain.symbol + "`: step " + std::to_string(i) + " (`" +
                         chain.steps[i].op->name +
                         "`) is before the GPU cut, so the staging image would not be uint8");
  }
  return Ok();
}

Result<TensorType> StagingType(const FusedChain& chain) {
  SLUICE_RETURN_IF_ERROR(CheckGpuSplit(chain));
  const TensorType& ot = chain.output;
  if (!ot.is_static() || ot.height_axis() < 0 || chain.input.dims.size() != 3) {
    return MakeError(ErrorCode::kUnsupported,
                     "chain `" + chain.symbol + "` has no static image output to split");
  }
  auto staged = TypeAtCut(chain);
  if (!staged) return std::unexpected(staged.error());
  return GpuStagingType(Image(DType::kUInt8, Layout::kHWC, ot.dims[ot.height_axis()],
                              ot.dims[ot.width_axis()], staged->dims[staged->channel_axis()]));
}

Result<FusedChain> CpuPartChain(const FusedChain& chain) {
  auto staging = StagingType(chain);
  if (!staging) return std::unexpected(staging.error());
  FusedChain part;
  part.symbol = chain.symbol + kCpuPartSuffix;
  part.input = chain.input;
  part.output = *staging;
  part.steps.assign(chain.steps.begin(), chain.steps.begin() + chain.gpu_from);
  part.gpu_from = -1;
  return part;
}

namespace codegen_internal {

Result<GpuBatchPipeline> BuildGpuBatchPipeline(const FusedChain& chain,
                                               const Halide::Target& target) {
  (void)target;
  auto staging = StagingType(chain);
  if (!staging) return std::unexpected(staging.error());
  const int sh = static_cast<int>(staging->dims[staging->height_axis()]);
  const int sw = static_cast<int>(staging->dims[staging->width_axis()]);
  const int sc = static_cast<int>(staging->dims[staging->channel_axis()]);
  const TensorType& ot = chain.output;
  const int out_c = static_cast<int>(ot.dims[ot.channel_axis()]);

  ImageParam in(UInt(8), 4, "in");
  Var c("c"), x("x"), y("y"), n("n");

  // The same lowerings as the per-sample pipeline's tail, over (c, x, y, n).
  TailState tail;
  tail.cur = Func("staged");
  tail.cur(c, x, y, n) = cast<float>(in(c, x, y, n));
  tail.dtype = DType::kUInt8;
  tail.channels = sc;
  for (int i = chain.gpu_from; i < static_cast<int>(chain.steps.size()); ++i) {
    const ChainStep& s = chain.steps[i];
    LowerContext ctx;
    ctx.step = &s;
    ctx.c = c;
    ctx.x = x;
    ctx.y = y;
    ctx.batch = {n};
    ctx.width = sw;
    ctx.height = sh;
    ctx.name = s.op->name + "_" + std::to_string(s.op_id);
    SLUICE_RETURN_IF_ERROR(LowerStep(ctx, tail));
  }
  Func cur = tail.cur;
  const DType dt = tail.dtype;
  const int ch = tail.channels;
  if (ch != out_c || dt != ot.dtype) {
    return MakeError(ErrorCode::kInternal, "chain `" + chain.symbol + "`: GPU tail computes " +
                                               std::string(DTypeName(dt)) + " x" +
                                               std::to_string(ch) + " but the output type is " +
                                               ot.ToString());
  }

  Func out(chain.symbol + kGpuBatchSuffix);
  const bool chw = ot.layout == Layout::kCHW;
  Expr value = cast(HalideType(ot.dtype), cur(c, x, y, n));
  if (chw) {
    out(x, y, c, n) = value;
  } else {
    out(c, x, y, n) = value;
  }
  const int oh = static_cast<int>(ot.dims[ot.height_axis()]);
  const int ow = static_cast<int>(ot.dims[ot.width_axis()]);
  if (oh != sh || ow != sw) {
    return MakeError(ErrorCode::kInternal,
                     "chain `" + chain.symbol + "`: staging and output extents differ");
  }
  OutputImageParam ob = out.output_buffer();
  const int plane = ow * oh * out_c;
  codegen_internal::SetDenseSampleBounds(ob, chw, ow, oh, out_c);
  ob.dim(3).set_min(0).set_stride(plane);
  // Planar staging (gpu_staging.h), dims (c, x, y, n).
  in.dim(0).set_bounds(0, sc).set_stride(sw * sh);
  in.dim(1).set_bounds(0, sw).set_stride(1);
  in.dim(2).set_bounds(0, sh).set_stride(sw);
  in.dim(3).set_min(0).set_stride(sc * sw * sh);
  // Same batch extent in and out.
  in.dim(3).set_extent(ob.dim(3).extent());

  // One launch: 16x16 pixel tiles x batch on the grid, channels unrolled in
  // each thread.
  Var xo("xo"), yo("yo"), xi("xi"), yi("yi");
  out.bound(c, 0, out_c).reorder(c, x, y, n);
  out.unroll(c).gpu_tile(x, y, xo, yo, xi, yi, 16, 16, TailStrategy::GuardWithIf).gpu_blocks(n);

  GpuBatchPipeline result{Pipeline(out), {in}};
  return result;
}

}  // namespace codegen_internal
}  // namespace sluice
