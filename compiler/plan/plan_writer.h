// The plan artifact: `sluice compile SPEC -o NAME.plan` writes a directory
//
//   NAME.plan/plan.json   what the runtime loads (schemas/plan.schema.json; layout
//                         documented in docs/plan.md)
//   NAME.plan/kernels.so  the fused kernels (compiler/codegen), CPU targets + CUDA
//   NAME.plan/report.txt  what the compiler decided and why, for people
//
// Contract: the graph has been through every pass without errors. WritePlan
// only writes plan.json and report.txt and records the given kernel record
// (kernels.so must already be in out_dir); the compile driver
// (compiler/driver/compiler.cc, Compilation::WritePlan) does the whole job:
// creates out_dir, builds the FusedChains, runs the code generator, hashes
// kernels.so and calls WritePlan.
//
// Thread safety: the functions are pure or touch only out_dir.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hardware_profile.h"
#include "compiler/ir/ir.h"
#include "plan/plan_document.h"
#include "sluice/result.h"

namespace sluice {

// What the code generator built, as the plan records it (the driver copies it
// from compiler/codegen's KernelArtifact, so the plan writer does not depend on
// the code generator).
struct BuiltKernels {
  std::vector<std::string> cpu_targets;  // as built
  std::string cuda_target;               // empty when CUDA kernels were not built
  std::string cuda_note;                 // why not, when cuda was requested but not built
  struct Kernel {
    std::string symbol;            // CPU multitarget entry
    std::string cuda_symbol;       // empty without CUDA
    std::string cpu_part_symbol;   // with a built GPU split: CPU kernel of steps [0, gpu_from)
    std::string gpu_batch_symbol;  // with a built GPU split: batch-wide CUDA kernel of the rest
  };
  std::vector<Kernel> kernels;         // one per fusion group, in group order
  std::vector<std::string> arg_names;  // the scalar argument layout (ops/fusion/kernel_abi.h)
};

// What plan.json records about kernels.so.
struct KernelRecord {
  BuiltKernels artifact;
  std::string hash;    // plan_format::HashBytes of kernels.so
  int64_t bytes = 0;   // its size
};

// plan.json's content (the spec's text gives the spec hash; `profile`, the
// hardware profile placement used, may be null).
PlanDocument BuildPlanDocument(const Graph& graph, const std::string& spec_text,
                               const KernelRecord& kernels, const HardwareProfile* profile);
// BuildPlanDocument(...).ToJson().
nlohmann::json PlanJson(const Graph& graph, const std::string& spec_text,
                        const KernelRecord& kernels, const HardwareProfile* profile = nullptr);
// report.txt's content.
std::string PlanReport(const Graph& graph, const KernelRecord& kernels,
                       const HardwareProfile* profile = nullptr);

// Writes plan.json and report.txt into out_dir (which must exist), each
// through WriteFileAtomically (common/atomic_file.h: a unique temporary file,
// fsynced, renamed, the directory fsynced); returns the report. Errors: kIo.
Result<std::string> WritePlan(const Graph& graph, const std::string& spec_text,
                              const KernelRecord& kernels, const std::string& out_dir,
                              const HardwareProfile* profile = nullptr);

}  // namespace sluice
