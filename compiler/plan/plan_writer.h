// The plan artifact: `sluice compile SPEC -o NAME.plan` writes a directory
//
//   NAME.plan/plan.json   what the runtime loads (schemas/plan.schema.json; layout
//                         documented in docs/plan.md)
//   NAME.plan/kernels.so  the fused kernels (compiler/codegen), CPU targets + CUDA
//   NAME.plan/report.txt  what the compiler decided and why, for people
//
// Contract: the graph has been through every pass without errors. WritePlan
// only writes plan.json and report.txt and records the given kernel artifact
// (kernels.so must already be in out_dir); CompilePlan does the whole job:
// creates out_dir, builds the FusedChains, runs the code generator, hashes
// kernels.so and writes the rest.
//
// Thread safety: CompilePlan calls CompileKernels, which is single-threaded
// (see codegen.h); the other functions are pure or touch only out_dir.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/hardware_profile.h"
#include "compiler/codegen/codegen.h"
#include "compiler/ir/ir.h"
#include "plan/plan_document.h"
#include "sluice/result.h"

namespace sluice {

// What plan.json records about kernels.so besides the codegen's artifact.
struct KernelRecord {
  KernelArtifact artifact;
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

// Writes plan.json and report.txt into out_dir (which must exist); returns the
// report. Errors: kIo.
Result<std::string> WritePlan(const Graph& graph, const std::string& spec_text,
                              const KernelRecord& kernels, const std::string& out_dir,
                              const HardwareProfile* profile = nullptr);

// The whole artifact; returns the report. out_dir is created if missing (an
// existing directory is overwritten file by file; an existing non-directory is
// kInvalidArgument). Errors from the code generator pass through.
Result<std::string> CompilePlan(const Graph& graph, const std::string& spec_text,
                                const std::string& out_dir, const CodegenOptions& options = {},
                                const HardwareProfile* profile = nullptr);

}  // namespace sluice
