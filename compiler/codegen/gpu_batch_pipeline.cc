// Split fusion groups: the CPU part as a chain of its own, and the batch-wide
// CUDA pipeline of the pointwise tail (see gpu_batch_pipeline.h).
//
// The tail repeats the arithmetic of the per-sample pipelines' pointwise tail
// (chain_pipeline.cc) op by op: the staging image holds exactly the uint8
// values the whole-chain kernel has at the cut (its resampling rounds to
// uint8, and every op before the cut keeps uint8), so running the same
// expressions on them gives the whole chain's output.
#include "compiler/codegen/gpu_batch_pipeline.h"

#include <string>

#include "compiler/codegen/halide_dtype.h"
#include "ops/fusion/kernel_abi.h"
#include "ops/fusion/sample_args.h"

namespace sluice {
namespace {

using namespace Halide;
using codegen_internal::HalideType;
using codegen_internal::RoundTo;

}  // namespace

bool GpuTailOp(const std::string& op_name) {
  return op_name == "grayscale" || op_name == "normalize" || op_name == "layout" ||
         op_name == "cast";
}

Status CheckGpuSplit(const FusedChain& chain) {
  const int n = static_cast<int>(chain.steps.size());
  if (chain.gpu_from <= 0 || chain.gpu_from >= n) {
    return MakeError(ErrorCode::kUnsupported,
                     "chain `" + chain.symbol + "`: gpu_from " + std::to_string(chain.gpu_from) +
                         " does not split its " + std::to_string(n) +
                         " steps (the CPU part needs the resampling steps, the GPU part at "
                         "least one op)");
  }
  for (int i = 0; i < n; ++i) {
    const std::string& name = chain.steps[i].op->name;
    if (i >= chain.gpu_from && !GpuTailOp(name)) {
      return MakeError(ErrorCode::kUnsupported,
                       "chain `" + chain.symbol + "`: step " + std::to_string(i) + " (`" + name +
                           "`) cannot run on the GPU batch-wide (only grayscale, normalize, "
                           "layout and cast can)");
    }
    if (i < chain.gpu_from && (name == "normalize" || name == "cast")) {
      return MakeError(ErrorCode::kUnsupported,
                       "chain `" + chain.symbol + "`: step " + std::to_string(i) + " (`" + name +
                           "`) is before the GPU cut, so the staging image would not be uint8");
    }
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
  int64_t channels = chain.input.dims[2];
  for (int i = 0; i < chain.gpu_from; ++i) {
    if (chain.steps[i].op->name == "grayscale") {
      channels = chain.steps[i].params.at("num_output_channels").AsInt();
    }
  }
  return Image(DType::kUInt8, Layout::kHWC, ot.dims[ot.height_axis()],
               ot.dims[ot.width_axis()], channels);
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
  const int sh = static_cast<int>(staging->dims[0]), sw = static_cast<int>(staging->dims[1]);
  const int sc = static_cast<int>(staging->dims[2]);
  const TensorType& ot = chain.output;
  const int out_c = static_cast<int>(ot.dims[ot.channel_axis()]);

  ImageParam in(UInt(8), 4, "in");
  Var c("c"), x("x"), y("y"), n("n");

  Func cur("staged");
  cur(c, x, y, n) = cast<float>(in(c, x, y, n));
  DType dt = DType::kUInt8;
  int ch = sc;
  for (int i = chain.gpu_from; i < static_cast<int>(chain.steps.size()); ++i) {
    const ChainStep& s = chain.steps[i];
    const std::string& name = s.op->name;
    Func next(name + "_" + std::to_string(s.op_id));
    if (name == "grayscale") {
      const int k = static_cast<int>(s.params.at("num_output_channels").AsInt());
      Expr l = ch == 1 ? cur(0, x, y, n)
                       : cast<float>(Expr(0.299) * cast<double>(cur(0, x, y, n)) +
                                     Expr(0.587) * cast<double>(cur(1, x, y, n)) +
                                     Expr(0.114) * cast<double>(cur(2, x, y, n)));
      next(c, x, y, n) = RoundTo(dt, l);
      ch = k;
    } else if (name == "normalize") {
      const auto& mean = s.params.at("mean").AsFloatList();
      const auto& sd = s.params.at("std").AsFloatList();
      const double scale = s.params.at("scale").AsFloat();
      Expr mv = static_cast<float>(mean[0]), sv = static_cast<float>(sd[0]);
      for (int j = 1; j < ch; ++j) {
        if (mean.size() > 1) mv = select(c == j, static_cast<float>(mean[j]), mv);
        if (sd.size() > 1) sv = select(c == j, static_cast<float>(sd[j]), sv);
      }
      if (!IsFloat(dt)) dt = DType::kFloat32;
      next(c, x, y, n) =
          RoundTo(dt, (cur(c, x, y, n) * static_cast<float>(1.0 / scale) - mv) / sv);
    } else if (name == "cast") {
      auto parsed = ParseDType(s.params.at("dtype").AsString());
      if (!parsed) return MakeError(ErrorCode::kInternal, "bad cast dtype in `" + chain.symbol + "`");
      dt = *parsed;
      next(c, x, y, n) = RoundTo(dt, cur(c, x, y, n));
    } else if (name == "layout") {
      next(c, x, y, n) = cur(c, x, y, n);
    } else {
      return MakeError(ErrorCode::kUnsupported, "op `" + name + "` in a GPU batch tail");
    }
    cur = next;
  }
  if (ch != out_c || dt != ot.dtype) {
    return MakeError(ErrorCode::kInternal,
                     "chain `" + chain.symbol + "`: GPU tail computes " +
                         std::string(DTypeName(dt)) + " x" + std::to_string(ch) +
                         " but the output type is " + ot.ToString());
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
    return MakeError(ErrorCode::kInternal, "chain `" + chain.symbol +
                                               "`: staging and output extents differ");
  }
  OutputImageParam ob = out.output_buffer();
  const int plane = ow * oh * out_c;
  codegen_internal::SetDenseSampleBounds(ob, chw, ow, oh, out_c);
  ob.dim(3).set_min(0).set_stride(plane);
  in.dim(0).set_bounds(0, sc).set_stride(1);
  in.dim(1).set_bounds(0, sw).set_stride(sc);
  in.dim(2).set_bounds(0, sh).set_stride(sc * sw);
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
