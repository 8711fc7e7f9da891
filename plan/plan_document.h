// PlanDocument: plan.json as one struct, and its only reader and writer.
//
// The plan writer (compiler/plan/plan_writer.cc) fills a PlanDocument and
// writes ToJson(); Plan::Load (runtime/plan/plan.cc) reads FromJson() and
// resolves ops and parameters against the registry; `sluice tune`
// (runtime/tune/autotuner.cc) reads the document, sets `tuned` and writes it
// back. Layout and meaning of every key: docs/plan.md; schema:
// schemas/plan.schema.json.
//
// What is typed here is what a runtime reads; parameters stay JSON (they are
// read against the registry's ParamDefs by whoever resolves the ops, see
// ops/fusion/plan_format.h), and the parts written for people and tools only
// (graph, placement details, kernel ABI description) are kept as JSON so that
// a document read and written back is the same JSON.
//
// Lives in sluice_ops (plan/ is in its source glob): the compiler and the
// runtime both link it, and neither Halide nor the registry is needed.
//
// Thread safety: plain data; the functions are pure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ops/types.h"
#include "sluice/result.h"

namespace sluice {

struct PlanStepDoc {
  std::string op;
  int op_id = 0;
  nlohmann::json params = nlohmann::json::object();
  bool operator==(const PlanStepDoc&) const = default;
};

// plan.json "fusion_groups" entry.
struct PlanGroupDoc {
  int id = 0;
  std::string symbol;
  std::string cuda_symbol;                         // "": null
  nlohmann::json nodes = nlohmann::json::array();  // node ids (informative)
  std::string input, output;                       // value names (informative)
  TensorType input_type, output_type;
  std::string batch_field;
  std::vector<PlanStepDoc> steps;
  int gpu_from = -1;
  std::string cpu_part_symbol, gpu_batch_symbol;  // "": null
  std::optional<TensorType> staging_type;
  nlohmann::json abi;  // informative
  bool operator==(const PlanGroupDoc&) const = default;
};

// plan.json "reference_chains" entry.
struct PlanReferenceDoc {
  std::string batch_field;
  std::string symbol;
  nlohmann::json nodes = nlohmann::json::array();
  std::string input, output;
  TensorType input_type, output_type;
  std::vector<PlanStepDoc> steps;
  std::string reason;
  bool operator==(const PlanReferenceDoc&) const = default;
};

struct PlanKernelsDoc {
  std::string file = "kernels.so";
  std::string hash;
  int64_t bytes = 0;
  std::vector<std::string> cpu_targets;
  std::string cuda_target;  // "": null (not built)
  std::string cuda_note;
  bool operator==(const PlanKernelsDoc&) const = default;
};

// plan.json "decode": the plan's decode step and what decode_pushdown decided.
struct PlanDecodeDoc {
  std::string op;                                    // e.g. "decode_jpeg"
  nlohmann::json params = nlohmann::json::object();  // every declared param, ${VARS} unbound
  int node = -1;                                     // its graph node id
  bool roi = false;          // the fused chain's crop window may be the region of interest
  bool dct_scaling = false;  // DCT-scaled decode may be used when the run asks for it
  std::string reason;
  bool operator==(const PlanDecodeDoc&) const = default;
};

// plan.json "memory": the batch buffer layout memory_planning computed.
struct PlanFieldMemoryDoc {
  std::string field;
  DType dtype = DType::kUInt8;
  std::vector<int64_t> sample_shape;
  int64_t bytes_per_sample = 0;
  int64_t offset = 0;
  int64_t staging_bytes_per_sample = 0;  // 0: no GPU tail
  int64_t staged_offset = 0;
  bool operator==(const PlanFieldMemoryDoc&) const = default;
};
struct PlanMemoryDoc {
  int64_t batch_size = 0;
  std::vector<PlanFieldMemoryDoc> fields;  // in field-name order
  int64_t batch_bytes = 0;
  int64_t staged_batch_bytes = 0;
  bool operator==(const PlanMemoryDoc&) const = default;
};

// One batch field's block in a batch buffer: samples [0, batch_size) of it at
// offset + i * bytes_per_sample.
struct PlanFieldExtent {
  std::string field;
  int64_t offset = 0;
  int64_t bytes_per_sample = 0;
};

// The check every reader of a batch buffer layout runs before anything is
// written there (the kernels write each field's slots unchecked): a positive
// buffer size, no negative offset, every field's [offset, offset +
// bytes_per_sample * batch_size) inside [0, buffer_bytes), no two fields
// overlapping. Errors: kCorruptData, "WHERE: plan.json "memory" ..." with a
// hint to recompile. ResolveLoaderConfig (runtime/exec) runs it on the layout
// it will use; CheckMemoryLayout on both of a document's.
Status CheckBatchLayout(const std::vector<PlanFieldExtent>& fields, int64_t batch_size,
                        int64_t buffer_bytes, const std::string& where);

// plan.json "memory" on its own, as `sluice verify` checks it (Plan::Verify):
// present, for the batch's size and fields (`batch` is plan.json "batch"), and
// both its layouts (the CPU one: offset, bytes_per_sample, batch_bytes; the
// staged one: staged_offset, staging_bytes_per_sample where non-zero, else
// bytes_per_sample, staged_batch_bytes) pass CheckBatchLayout. Errors:
// kCorruptData.
Status CheckMemoryLayout(const std::optional<PlanMemoryDoc>& memory, const nlohmann::json& batch,
                         const std::string& where);

// plan.json "tuned" (written by `sluice tune`).
struct PlanTunedDoc {
  int threads = -1, in_flight = -1, prefetch = -1, cpu_budget = -1;
  double images_per_second = 0;
  // Informative keys (memory_budget, batch_bytes, trials, profile_machine, tuned_at).
  nlohmann::json info = nlohmann::json::object();
  bool operator==(const PlanTunedDoc&) const = default;
};

struct PlanDocument {
  int format_version = 0;
  std::string compiler_version, spec_hash, spec_file, name;
  std::string source_format;
  nlohmann::json source_params = nlohmann::json::object();
  nlohmann::json source_outputs = nlohmann::json::array();  // informative
  nlohmann::json sampling = nlohmann::json::object();
  nlohmann::json batch = nlohmann::json::object();
  nlohmann::json output = nlohmann::json::object();
  nlohmann::json graph = nlohmann::json::object();  // {"nodes", "notes"}: informative
  std::vector<PlanGroupDoc> fusion_groups;
  std::vector<PlanReferenceDoc> reference_chains;
  PlanKernelsDoc kernels;
  // "placement": `placement_device` is what a runtime reads ("cpu" or
  // "cuda:N"); the rest (requested, reason, nodes, alternatives, prediction)
  // is informative and kept as written.
  std::string placement_device = "cpu";
  nlohmann::json placement = nlohmann::json::object();
  std::optional<PlanDecodeDoc> decode;  // absent: the plan has no decode step
  std::optional<PlanMemoryDoc> memory;  // absent in plans from before memory_planning
  std::optional<PlanTunedDoc> tuned;    // absent until `sluice tune`

  bool operator==(const PlanDocument&) const = default;

  nlohmann::json ToJson() const;
  // Reads a plan.json document. `where` starts each error message (e.g.
  // "plan `train.plan`"). Errors: kCorruptData (a missing or mistyped key:
  // "WHERE: plan.json has no ..."), kVersionMismatch (format_version is not
  // plan_format::kFormatVersion; a tensor type this Sluice cannot read).
  static Result<PlanDocument> FromJson(const nlohmann::json& j, const std::string& where);

  // plan.json in `dir`: read (kNotFound when absent, kCorruptData when not
  // JSON, then FromJson) and write (2-space JSON and a newline, through
  // WriteFileAtomically: a unique temporary file, fsynced and renamed over
  // it, so a crash or a concurrent writer never leaves a partial plan.json;
  // kIo).
  static Result<PlanDocument> Read(const std::string& dir, const std::string& where);
  Status Write(const std::string& dir) const;
};

}  // namespace sluice
