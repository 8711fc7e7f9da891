// SplitForGpu: turns a compiled CPU plan into a plan whose first fusion group
// runs its pointwise tail batch-wide on the GPU, the way the placement pass
// would with a GPU profile, without needing one: the chain is cut at its first
// legal split point (GpuSplitPoints: steps before it run per sample on the CPU
// and write a uint8 staging image, the rest have a batch-wide GPU lowering),
// the kernels are recompiled with CUDA, and plan.json gets the group's gpu
// fields, the staged batch layout (the memory_planning pass's LayOutBatch),
// placement device cuda:0 and output.device auto
// (the loader takes the GPU when there is one, else warns and runs the whole
// chain on the CPU).
//
// Used by tests/runtime/exec/gpu_stage_test.cc (on its test plan) and by
// sluice_make_gpu_plan (tests/runtime/exec/make_gpu_plan.cc), which the GPU kit
// (scripts/gpu_kit.sh) runs to ship GPU plans to a machine without a compiler.
// Needs the compiler (Halide with NVPTX); not for SLUICE_TESTS_NO_COMPILER builds.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/codegen/codegen.h"
#include "compiler/passes/fused_chains.h"
#include "compiler/passes/pass.h"
#include "ops/fusion/plan_format.h"
#include "runtime/plan/plan_internal.h"
#include "sluice/plan.h"

namespace sluice::testing_gpu {

// Rewrites the plan directory `plan_dir` in place (see above). `cpu_targets`:
// the CPU targets of the recompiled kernels.so. Returns the cut (gpu_from).
// Errors: the plan does not load, its first chain has no GPU split point, or
// the CUDA compile failed.
inline Result<int> SplitForGpu(const std::string& plan_dir,
                               const std::vector<std::string>& cpu_targets) {
  namespace fs = std::filesystem;
  using json = nlohmann::json;
  auto plan = Plan::Load(plan_dir, {{"DATA", "."}});  // data is not read here
  if (!plan) return std::unexpected(plan.error());
  std::vector<FusedChain> chains = plan->chains();
  if (chains.empty()) return MakeError(ErrorCode::kInvalidArgument, "the plan has no fused chain");
  const std::vector<int> splits = GpuSplitPoints(chains[0]);
  if (splits.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "chain `" + chains[0].symbol + "` has no GPU split point");
  }
  const int cut = splits.front();
  chains[0].gpu_from = cut;
  CodegenOptions opt;
  opt.cpu_targets = cpu_targets;
  opt.cuda = true;
  auto art = CompileKernels(chains, plan_dir, opt);
  if (!art) return std::unexpected(art.error());
  if (art->cuda_target.empty()) {
    return MakeError(ErrorCode::kUnsupported, "no CUDA kernels were built: " + art->cuda_note);
  }
  std::ifstream in(fs::path(plan_dir) / "plan.json");
  json j = json::parse(in);
  in.close();
  j["kernels"]["hash"] = *plan_format::HashFile(art->library);
  j["kernels"]["cuda_target"] = art->cuda_target;
  json& group = j["fusion_groups"][0];
  group["gpu_from"] = cut;
  group["cpu_part_symbol"] = art->kernels[0].cpu_part_symbol;
  group["gpu_batch_symbol"] = art->kernels[0].gpu_batch_symbol;
  group["staging_type"] = plan_format::TypeToJson(art->kernels[0].staging);
  // The staged layout, as memory_planning lays it out: the split field's host
  // block holds the uint8 staging images.
  json& memory = j["memory"];
  std::vector<FieldMemory> fields;
  for (const json& f : memory["fields"]) {
    fields.push_back(FieldMemory{
        .field = f["field"].get<std::string>(),
        .bytes_per_sample = f["bytes_per_sample"].get<int64_t>(),
        .staging_bytes_per_sample = f["staging_bytes_per_sample"].get<int64_t>()});
  }
  for (FieldMemory& f : fields) {
    if (f.field != plan->chain_fields()[0]) continue;
    f.staging_bytes_per_sample = 1;  // uint8: one byte per element
    for (int64_t d : art->kernels[0].staging.dims) f.staging_bytes_per_sample *= d;
  }
  const MemoryPlan laid_out = LayOutBatch(std::move(fields), memory["batch_size"].get<int64_t>());
  for (size_t i = 0; i < laid_out.fields.size(); ++i) {
    memory["fields"][i]["staging_bytes_per_sample"] = laid_out.fields[i].staging_bytes_per_sample;
    memory["fields"][i]["staged_offset"] = laid_out.fields[i].staged_offset;
  }
  memory["staged_batch_bytes"] = laid_out.staged_batch_bytes;
  j["placement"]["device"] = "cuda:0";
  j["output"]["device"] = "auto";
  std::ofstream(fs::path(plan_dir) / "plan.json") << j.dump(2);
  return cut;
}

}  // namespace sluice::testing_gpu
