// The op registry: the single source of truth about every op.
//
// One entry per op, declared in one file per op family (ops/*_ops.cc). An entry
// gives the op's class, its parameters, the rule that computes its output
// types from its input types, cross-parameter checks, and a plain C++ reference
// implementation used by tests as the oracle for generated kernels. The JSON
// Schema (`sluice schema`) and docs/spec.md's op reference are generated from
// these entries.
//
// Thread safety: the registry is built once, on first use, and is immutable
// afterwards; every function here may be called from any thread.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/param.h"
#include "ops/reference/ref_tensor.h"
#include "ops/types.h"
#include "sluice/result.h"

namespace sluice {

class SampleRng;
class GeometryComposer;  // ops/fusion/geometry.h

enum class OpClass { kSource, kDecode, kResample, kPointwise, kBatch, kDevice };
std::string_view OpClassName(OpClass op_class);

// A problem with one parameter, found by an op's cross-parameter check
// (for example scale: [0.9, 0.1] whose bounds are reversed).
struct ParamIssue {
  std::string param;  // which parameter to point at
  std::string message;
  std::string hint;
};

// The context a reference implementation runs in.
struct RefContext {
  SampleRng* rng = nullptr;  // draws keyed by (seed, epoch, sample, op id); null for ops
                             // that are not random
};

// What an op is to the fusion passes and the code generator.
//   kNone:      not fusable (sources, decoders, batch): runs outside fused kernels.
//   kGeometry:  composes into the fused kernel's per-axis resample through its
//               GeometryFusion hook (no Halide lowering of its own).
//   kPointwise: a per-pixel op of the fused kernel's tail; its Halide lowering
//               is registered in compiler/codegen/lower/ (one function per op).
enum class FusionRole { kNone, kGeometry, kPointwise };

// How a geometry op composes into a fused kernel (FusionRole::kGeometry).
struct GeometryFusion {
  // Applies one step to the composition: crops, pads, flips or the one
  // rescale, reading the current size from `g`. `rng` is the step's generator
  // (SampleRng(seed, epoch, sample, op_id)) for a random op, null otherwise;
  // draws must be in the order of the op's reference implementation.
  std::function<void(const ParamList&, SampleRng*, GeometryComposer& g)> compose;
  bool rescales = false;   // changes the scale (resize): at most one per fused chain
  bool crops = false;      // takes a sub-window of its input (a decoder's region of interest)
  bool zero_fill = false;  // parts outside the image are zeros (crop, center_crop)
  // Why this step cannot be fused ("" when it can), e.g. pad with mode edge.
  std::function<std::string(const ParamList&)> unfusable;
  // The constant value of the pixels this step adds, when it adds any (pad).
  std::function<std::optional<double>(const ParamList&)> fill;
};

// Cost terms the cost model (compiler/cost/) charges per step of a fused
// chain, in units of the hardware profile's rates. The registry fills class
// defaults for an entry that leaves them at 0: a resample-class op costs one
// resampled output pixel, a pointwise-class op one profiled pointwise op per
// output element.
struct OpCost {
  double resample_px = 0;     // x resample_ns_per_px per output pixel (geometry ops)
  double pointwise_elem = 0;  // x pointwise_ns_per_elem / kProfiledTailOps per output element
};

struct OpDef {
  std::string name;
  OpClass op_class = OpClass::kPointwise;
  std::string doc;  // one or two sentences for the reference
  std::vector<ParamDef> params;
  // Names of the tensors this op produces, in order. Graph ops produce one
  // tensor named by the step's `out`; source ops produce fixed names
  // (image_folder: jpg, cls).
  std::vector<std::string> output_names = {"out"};
  int num_inputs = 1;  // -1: variadic (batch)
  bool random = false;  // draws from the per-sample generator

  // Cross-parameter validation; per-parameter type/range checks are generic.
  std::function<std::vector<ParamIssue>(const ParamList&)> check;
  // Output types from input types. Errors carry message and hint; the caller
  // attaches the source mark.
  std::function<Result<std::vector<TensorType>>(std::span<const TensorType>, const ParamList&)>
      infer;
  // Reference implementation (graph ops only): one input, one output.
  std::function<Result<RefTensor>(const RefTensor&, const ParamList&, RefContext&)> reference;

  // ---- fusion, random draws, placement, cost --------------------------------
  FusionRole fusion = FusionRole::kNone;
  GeometryFusion geometry;  // kGeometry only
  // A random pointwise op's per-sample draws: `draw_slots` float kernel
  // arguments per step (each step of the op in a chain gets its own), filled by
  // `draw` from the step's generator in the reference implementation's order.
  // Random geometry ops draw in GeometryFusion::compose instead (0 slots).
  int draw_slots = 0;
  std::function<void(const ParamList&, SampleRng&, std::span<float> slots)> draw;
  // A deterministic pointwise op with a batch-wide GPU lowering: placement may
  // move it to the GPU tail of a split chain.
  bool gpu_batch = false;
  OpCost cost;
};

// All ops in a stable order (by name).
std::span<const OpDef* const> AllOps();
// The op called `name`, or null.
const OpDef* FindOp(std::string_view name);
// Ops of one class, by name.
std::vector<const OpDef*> OpsOfClass(OpClass op_class);

// The `source:` section's `format` names a source-class op; `batch:` is the
// batch-class op `batch` (variadic: one input per field).
//
// Declarations of the non-op spec sections (sampling, output); the front end
// validates them like op parameters and the schema is generated from them.
const std::vector<ParamDef>& SamplingParams();
const std::vector<ParamDef>& OutputParams();

// Cross-parameter checks of the `sampling:` and `output:` sections (the
// per-parameter type/range checks are generic, as for ops). Params have their
// defaults filled. Sampling: explicit rank must be < explicit world_size, and
// rank/world_size are not allowed with `sharding: none`. Output: `device` must
// pass CheckDeviceString.
std::vector<ParamIssue> CheckSamplingParams(const ParamList& params);
std::vector<ParamIssue> CheckOutputParams(const ParamList& params);

// Accepts "auto", "cpu", "cuda" and "cuda:N" (N a non-negative decimal integer).
// The error (kInvalidSpec) says what was given and lists the accepted forms.
Status CheckDeviceString(const std::string& device);

// `params` with every missing parameter that has a default in `defs` filled in,
// recursively for kSection fields (a missing section with defaulted fields is
// created). Required parameters that are missing stay missing.
ParamList WithDefaults(const std::vector<ParamDef>& defs, ParamList params);

// The closest name to `name` among `candidates` by edit distance, or "" when
// nothing is close enough to be a plausible typo.
std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace sluice
