#include "ops/fusion/sample_args.h"

#include <optional>
#include <span>
#include <string>

#include "ops/fusion/geometry.h"
#include "ops/random.h"

namespace sluice {

int DrawSlotOffset(const FusedChain& chain, size_t step) {
  int offset = 0;
  for (size_t i = 0; i < step && i < chain.steps.size(); ++i) {
    const OpDef* op = chain.steps[i].op;
    if (op != nullptr && op->fusion == FusionRole::kPointwise) offset += op->draw_slots;
  }
  return offset;
}

int DrawSlotCount(const FusedChain& chain) { return DrawSlotOffset(chain, chain.steps.size()); }

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
    if (step.op->fusion == FusionRole::kGeometry) {
      const GeometryFusion& g = step.op->geometry;
      if (pointwise_seen) return unsupported("`" + name + "` follows a pointwise op");
      if (g.rescales && ++rescales > 1) return unsupported("more than one rescaling op");
      if (g.unfusable) {
        if (std::string why = g.unfusable(step.params); !why.empty()) return unsupported(why);
      }
      if (g.zero_fill) zero_fill_ops = true;
      if (g.fill) {
        if (std::optional<double> f = g.fill(step.params)) {
          if (pad_fill && *pad_fill != *f)
            return unsupported("`" + name + "` ops with different fills");
          pad_fill = f;
        }
      }
    } else if (step.op->fusion == FusionRole::kPointwise) {
      pointwise_seen = true;
    } else {
      return unsupported("`" + name + "` is not a resample or pointwise op");
    }
  }
  if (zero_fill_ops && pad_fill &&
      RoundToDType(static_cast<float>(*pad_fill), DType::kUInt8) != 0) {
    return unsupported("`pad` fill differs from the zeros of crop/center_crop");
  }
  if (DrawSlotCount(chain) > kMaxDrawSlots) {
    return unsupported("its random pointwise steps need " + std::to_string(DrawSlotCount(chain)) +
                       " draw slots, more than the kernel's " + std::to_string(kMaxDrawSlots));
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
  GeometryComposer geometry(in_h, in_w);
  int slot = 0;
  for (const ChainStep& step : chain.steps) {
    const OpDef& op = *step.op;
    if (op.fusion == FusionRole::kGeometry) {
      if (op.random) {
        SampleRng rng(seed, epoch, sample, static_cast<uint32_t>(step.op_id));
        op.geometry.compose(step.params, &rng, geometry);
      } else {
        op.geometry.compose(step.params, nullptr, geometry);
      }
    } else if (op.fusion == FusionRole::kPointwise && op.draw_slots > 0) {
      if (slot + op.draw_slots > kMaxDrawSlots) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "chain `" + chain.symbol + "` needs more than " +
                             std::to_string(kMaxDrawSlots) + " draw slots");
      }
      SampleRng rng(seed, epoch, sample, static_cast<uint32_t>(step.op_id));
      op.draw(step.params, rng, std::span<float>(args.draws + slot, op.draw_slots));
      slot += op.draw_slots;
    }
  }
  const TensorType& out = chain.output;
  if (geometry.height() != out.dims[out.height_axis()] ||
      geometry.width() != out.dims[out.width_axis()]) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "a " + std::to_string(in_h) + "x" + std::to_string(in_w) + " image gives " +
                         std::to_string(geometry.height()) + "x" +
                         std::to_string(geometry.width()) + " through chain `" + chain.symbol +
                         "`, not its output " + out.ToString());
  }
  geometry.Finish(args);
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
