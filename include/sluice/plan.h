// A compiled plan, loaded: `Plan::Load("train.plan", {{"DATA", "/data/imagenet"}})`.
//
// A plan is the directory `sluice compile SPEC -o NAME.plan` writes (plan.json,
// kernels.so, report.txt; see docs/plan.md). Loading reads plan.json, checks
// that this Sluice can run it, binds the ${VARS} left symbolic in the spec's
// string parameters, rebuilds each fusion group's FusedChain from the op
// registry (and so each reference chain: a batch field that runs on the
// reference implementations), verifies kernels.so against the hash recorded
// in plan.json and dlopens it (runtime/kernels/kernel_library.h). No compiler, Halide or LLVM is
// involved: loading takes milliseconds.
//
// Errors (each message names the plan and says how to fix it):
//   kNotFound        no such plan directory, no plan.json, kernels.so missing
//   kCorruptData     plan.json not valid JSON or missing fields; kernels.so changed
//                    or truncated (hash mismatch) or not loadable; a kernel symbol missing
//   kVersionMismatch plan format version or compiler version not the ones this
//                    Sluice reads; an op the plan names that this Sluice does not know
//   kUnsupported     this CPU runs none of the plan's CPU targets
//   kInvalidArgument a ${VAR} the plan uses that `vars` does not bind
//
// Thread safety: a loaded Plan is immutable; its accessors may be called from
// any thread. Copies share the loaded kernels.so.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/fusion/fused_chain.h"
#include "ops/param.h"
#include "sluice/result.h"

namespace sluice {

namespace runtime {
class KernelLibrary;
class Kernel;
}  // namespace runtime

// Values for the ${NAME} references in a plan's string parameters.
using PlanVars = std::map<std::string, std::string>;

// `text` with every ${NAME} replaced by vars[NAME]. Errors (kInvalidArgument):
// a NAME not in `vars` (the message names it and `what`, e.g. "source.path"),
// or an unterminated "${".
Result<std::string> BindVariables(const std::string& text, const PlanVars& vars,
                                  const std::string& what);

// Knobs `sluice tune` measured and wrote into plan.json's "tuned" object.
// -1 = not tuned. The loader uses a tuned value for a knob the spec left
// `auto` (LoaderOptions and explicit spec values win over it).
struct TunedKnobs {
  int threads = -1;
  int in_flight = -1;
  int prefetch = -1;
  int cpu_budget = -1;  // the budget the knobs were tuned within
  double images_per_second = 0;  // measured with these knobs when tuned
};

// A fusion group whose tail runs batch-wide on the GPU (FusedChain::gpu_from).
// Present only when placement split the group and CUDA kernels were built.
struct GpuStage {
  int gpu_from = -1;             // steps [gpu_from, end) run on the GPU
  std::string cpu_part_symbol;   // CPU kernel of steps [0, gpu_from): writes `staging`
  std::string gpu_batch_symbol;  // batch-wide CUDA kernel of the rest
  TensorType staging;            // static uint8 HWC: what crosses the bus per sample
};

class Plan {
 public:
  static Result<Plan> Load(const std::string& path, const PlanVars& vars = {});

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  const std::string& spec_hash() const { return spec_hash_; }
  const std::string& compiler_version() const { return compiler_version_; }
  // The source op (image_folder, file_list, ...) and its params, ${VARS} bound.
  const std::string& source_format() const { return source_format_; }
  const ParamList& source_params() const { return source_params_; }
  // The decode step feeding the fusion groups and reference chains (the
  // decode-class graph node whose output they read): its op name (e.g.
  // "decode_jpeg"; "" in a plan with no chain) and its params, defaults filled
  // and ${VARS} bound. The loader creates its decoder from these.
  const std::string& decode_op() const { return decode_op_; }
  const ParamList& decode_params() const { return decode_params_; }
  const ParamList& sampling() const { return sampling_; }
  const ParamList& batch() const { return batch_; }    // size, fields
  const ParamList& output() const { return output_; }  // knobs, on_error, device
  // One chain per fusion group, in group order; chains()[i].symbol is its kernel.
  const std::vector<FusedChain>& chains() const { return chains_; }
  // The batch field each chain writes (parallel to chains()).
  const std::vector<std::string>& chain_fields() const { return chain_fields_; }
  // Batch fields no fusion group writes (plan.json "reference_chains"): each
  // chain's steps run per sample on the registry's reference implementations
  // (ReferenceChain, ops/fusion/sample_args.h); symbol = "reference:<field>",
  // gpu_from = -1, no kernel. Much slower than a fused kernel.
  const std::vector<FusedChain>& reference_chains() const { return reference_chains_; }
  // The batch field each reference chain writes (parallel to reference_chains()).
  const std::vector<std::string>& reference_fields() const { return reference_fields_; }
  // Why each is not fused, as the compiler said it (parallel; may be "").
  const std::vector<std::string>& reference_reasons() const { return reference_reasons_; }
  const std::vector<std::string>& cpu_targets() const { return cpu_targets_; }
  const std::string& cuda_target() const { return cuda_target_; }  // "" when not built
  // Parallel to chains(): the GPU tail of each chain, or nullopt (CPU only).
  const std::vector<std::optional<GpuStage>>& gpu_stages() const { return gpu_stages_; }
  // plan.json "placement.device": "cpu" or "cuda:N", what placement decided.
  const std::string& placement_device() const { return placement_device_; }
  const TunedKnobs& tuned() const { return tuned_; }
  const runtime::KernelLibrary& kernels() const { return *kernels_; }
  // The CPU kernel of chains()[i] (looked up and checked at load time).
  const runtime::Kernel& cpu_kernel(size_t i) const { return *cpu_kernels_[i]; }
  // The CPU-part kernel of chains()[i] (writes gpu_stages()[i]->staging), or
  // nullptr when the chain has no GPU stage.
  const runtime::Kernel* cpu_part_kernel(size_t i) const {
    return i < cpu_part_kernels_.size() ? cpu_part_kernels_[i].get() : nullptr;
  }

 private:
  std::string path_, name_, spec_hash_, compiler_version_, source_format_;
  ParamList source_params_, sampling_, batch_, output_;
  std::string decode_op_;
  ParamList decode_params_;
  std::vector<FusedChain> chains_;
  std::vector<std::string> chain_fields_;
  std::vector<FusedChain> reference_chains_;
  std::vector<std::string> reference_fields_, reference_reasons_;
  std::vector<std::string> cpu_targets_;
  std::string cuda_target_;
  std::vector<std::optional<GpuStage>> gpu_stages_;
  std::string placement_device_ = "cpu";
  TunedKnobs tuned_;
  std::shared_ptr<const runtime::KernelLibrary> kernels_;
  std::vector<std::shared_ptr<const runtime::Kernel>> cpu_kernels_;
  std::vector<std::shared_ptr<const runtime::Kernel>> cpu_part_kernels_;  // null: none
};

}  // namespace sluice
