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
//
// The public accessors describe the plan for users (name, spec hash, batch
// fields, devices, tuned knobs). The accessors whose types are the compiler's
// and the registry's (chains, parameters, kernels, the decode step, the memory
// plan) are for Sluice's own runtime, Python module and tests: their types are
// only declared here; include runtime/plan/plan_internal.h to use them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/result.h"

namespace sluice {

namespace runtime {
class KernelLibrary;
class Kernel;
}  // namespace runtime

// Defined in runtime/plan/plan_internal.h (and the headers it includes).
struct ParamValue;
using ParamList = std::map<std::string, ParamValue>;
struct FusedChain;
struct GpuStage;
struct PlanDocument;
struct PlanMemoryDoc;

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
  int cpu_budget = -1;           // the budget the knobs were tuned within
  double images_per_second = 0;  // measured with these knobs when tuned
  // `sluice tune --memory-budget` and the batch buffer size it measured (bytes,
  // -1 = none): the loader gives what the budget leaves after the prefetch
  // buffers to a remote tar_shards read-ahead left auto (docs/remote.md).
  int64_t memory_budget = -1;
  int64_t batch_bytes = -1;
};

// What Plan::Verify checked, for `sluice verify`.
struct PlanCheck {
  std::string name;
  int format_version = 0;
  std::string compiler_version;
  std::string spec_hash;
  std::string kernels_hash;  // plan.json's, which kernels.so matches
};

class Plan {
 public:
  static Result<Plan> Load(const std::string& path, const PlanVars& vars = {});
  // Runs Load's checks without loading anything: plan.json parses, its format
  // and compiler versions are ones this Sluice reads, every op and param it
  // names is known, its batch memory layout is one the loader accepts (inside
  // the batch buffer, no overlaps: CheckMemoryLayout, plan/plan_document.h),
  // and kernels.so's hash matches plan.json. Does not dlopen
  // kernels.so (no code from the plan runs), bind ${VARS} or check this CPU.
  // The hash detects a damaged or mismatched kernels.so, not a malicious one
  // (docs/plan.md, "Trust"). Errors: as Load, less kInvalidArgument and
  // kUnsupported.
  static Result<PlanCheck> Verify(const std::string& path);

  // ---- for users -------------------------------------------------------------
  const std::string& path() const;
  const std::string& name() const;
  const std::string& spec_hash() const;
  const std::string& compiler_version() const;
  // The source op (image_folder, file_list, ...).
  const std::string& source_format() const;
  // The batch fields in batch order (field-name order) and the batch size.
  std::vector<std::string> batch_fields() const;
  int64_t batch_size() const;
  const std::vector<std::string>& cpu_targets() const;
  const std::string& cuda_target() const;  // "" when not built
  // plan.json "placement.device": "cpu" or "cuda:N", what placement decided.
  const std::string& placement_device() const;
  const TunedKnobs& tuned() const;

  // ---- internal: the types are in runtime/plan/plan_internal.h ----------------
  // The source's params, ${VARS} bound.
  const ParamList& source_params() const;
  const ParamList& sampling() const;
  const ParamList& batch() const;   // size, fields
  const ParamList& output() const;  // knobs, on_error, device
  // One chain per fusion group, in group order; chains()[i].symbol is its kernel.
  const std::vector<FusedChain>& chains() const;
  // The batch field each chain writes (parallel to chains()).
  const std::vector<std::string>& chain_fields() const;
  // Batch fields no fusion group writes (plan.json "reference_chains"): each
  // chain's steps run per sample on the registry's reference implementations
  // (ReferenceChain, ops/fusion/sample_args.h); symbol = "reference:<field>",
  // gpu_from = -1, no kernel. Much slower than a fused kernel.
  const std::vector<FusedChain>& reference_chains() const;
  // The batch field each reference chain writes (parallel to reference_chains()).
  const std::vector<std::string>& reference_fields() const;
  // Why each is not fused, as the compiler said it (parallel; may be "").
  const std::vector<std::string>& reference_reasons() const;
  // Parallel to chains(): the GPU tail of each chain, or nullopt (CPU only).
  const std::vector<std::optional<GpuStage>>& gpu_stages() const;
  // The plan's decode step (plan.json "decode"): the op ("decode_jpeg", ...;
  // "" when the plan has none) and its params, defaults filled, ${VARS} bound.
  const std::string& decode_op() const;
  const ParamList& decode_params() const;
  // What decode_pushdown decided for that step: the fused chain's crop window
  // may become the decoder's region of interest; DCT-scaled decode may be used
  // when the run asks for it (LoaderOptions::dct_scaling).
  bool decode_roi_allowed() const;
  bool decode_dct_scaling_allowed() const;
  // The batch buffer layout memory_planning computed (plan.json "memory"), or
  // null for a plan compiled before it.
  const PlanMemoryDoc* memory() const;
  // plan.json as read.
  const PlanDocument& document() const;
  const runtime::KernelLibrary& kernels() const;
  // The CPU kernel of chains()[i] (looked up and checked at load time).
  const runtime::Kernel& cpu_kernel(size_t i) const;
  // The CPU-part kernel of chains()[i] (writes gpu_stages()[i]->staging), or
  // nullptr when the chain has no GPU stage.
  const runtime::Kernel* cpu_part_kernel(size_t i) const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;  // immutable; copies share it
};

}  // namespace sluice
