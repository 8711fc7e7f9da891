// Pass `memory_planning`: lays out the batch buffer from the static types.
//
// Rewrites: Graph::memory only (batch size, per batch field dtype, sample
// shape, bytes per sample, the offset of its [B, ...] block, the GPU staging
// bytes of a field whose chain's tail runs on the GPU, and the bytes of one
// batch buffer with and without GPU staging). No diagnostics but an internal
// error on a size overflow (see Sizes below).
//
// Why: the buffer layout follows from the types the passes derived, so the
// compiler computes it once and records it in plan.json, instead of every
// runtime recomputing it. Pool counts (how many batch buffers) depend on the
// run's prefetch and stay run-time knobs.
//
// Layout: one block per batch field in field-name order (the order of the batch
// node's outputs), each [B, sample_shape...] and 64-byte aligned. A field whose
// fusion group placement split onto the GPU writes its staging image (the
// static uint8 HWC output of the step before the GPU tail) into the host
// buffer instead when GPU tails are used; `staged_offset` and
// `staged_batch_bytes` give that layout. A field with a non-static or bytes
// type gets no block (the loader rejects such a plan when it loads it).
//
// Sizes: all arithmetic is checked. The `batch` op's type rule already bounds
// the batch buffer (64 GiB) and type_inference each sample (2^31-1 bytes), so
// an overflow here is a compiler bug: it is reported as an internal error at
// the batch's mark and the memory is left unplanned, never a wrapped size.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"

namespace sluice {
namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

// dims' product times `scale`; kSaturated on overflow.
int64_t Bytes(const std::vector<int64_t>& dims, int64_t scale) {
  int64_t n = scale;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n)) return kSaturated;
  }
  return n;
}

// (a + b * c) rounded up to 64; kSaturated on overflow.
int64_t AlignedEnd(int64_t a, int64_t b, int64_t c) {
  int64_t n = 0;
  if (__builtin_mul_overflow(b, c, &n) || __builtin_add_overflow(a, n, &n) ||
      __builtin_add_overflow(n, 63, &n)) {
    return kSaturated;
  }
  return n / 64 * 64;
}

// The static uint8 image at the cut of `group` when placement moved its tail
// to the GPU (the output of the group's last CPU node; the CPU part writes the
// same bytes planar, ops/fusion/gpu_staging.h); nullopt when the group has no
// GPU tail.
std::optional<TensorType> StagingType(const Graph& graph, int group) {
  std::vector<NodeId> nodes = GroupNodes(graph, group);
  for (size_t i = 1; i < nodes.size(); ++i) {
    if (graph.nodes[nodes[i]].device != Device::kGpu) continue;
    const Node& last_cpu = graph.nodes[nodes[i - 1]];
    if (last_cpu.device == Device::kGpu || last_cpu.outputs.empty()) return std::nullopt;
    return graph.value(last_cpu.outputs[0]).type;
  }
  return std::nullopt;
}

}  // namespace

MemoryPlan LayOutBatch(std::vector<FieldMemory> fields, int64_t batch_size) {
  MemoryPlan plan;
  plan.planned = true;
  plan.batch_size = batch_size;
  int64_t offset = 0, staged = 0;
  for (FieldMemory& f : fields) {
    f.offset = offset;
    offset = AlignedEnd(offset, f.bytes_per_sample, batch_size);
    f.staged_offset = staged;
    const int64_t host =
        f.staging_bytes_per_sample > 0 ? f.staging_bytes_per_sample : f.bytes_per_sample;
    staged = AlignedEnd(staged, host, batch_size);
  }
  plan.fields = std::move(fields);
  plan.batch_bytes = std::max<int64_t>(offset, 64);
  plan.staged_batch_bytes = std::max<int64_t>(staged, 64);
  return plan;
}

void PlanMemory(Graph& graph, PassContext& context) {
  if (graph.nodes.empty()) return;
  const Node& batch = graph.nodes.back();
  if (batch.op == nullptr || batch.op->op_class != OpClass::kBatch) return;
  const ParamValue* size = FindParam(batch.params, "size");
  const int64_t batch_size =
      size != nullptr && std::holds_alternative<int64_t>(size->value) ? size->AsInt() : 0;
  std::vector<FieldMemory> fields;
  for (size_t i = 0; i < batch.outputs.size() && i < batch.inputs.size(); ++i) {
    const Value& out = graph.value(batch.outputs[i]);
    const Value& in = graph.value(batch.inputs[i]);
    if (!in.type || !in.type->is_static() || in.type->dtype == DType::kBytes) continue;
    FieldMemory f;
    f.field = out.name.starts_with(kBatchValuePrefix)
                  ? out.name.substr(std::string(kBatchValuePrefix).size())
                  : out.name;
    f.dtype = in.type->dtype;
    f.sample_shape = in.type->dims;
    f.bytes_per_sample = Bytes(f.sample_shape, DTypeSize(f.dtype));
    if (in.producer >= 0) {
      const int group = graph.nodes[in.producer].fusion_group;
      if (group >= 0) {
        if (auto staging = StagingType(graph, group)) {
          f.staging_bytes_per_sample = Bytes(staging->dims, DTypeSize(staging->dtype));
        }
      }
    }
    fields.push_back(std::move(f));
  }
  MemoryPlan plan = LayOutBatch(std::move(fields), batch_size);
  if (plan.batch_bytes == kSaturated || plan.staged_batch_bytes == kSaturated) {
    context.diags.Add(
        Error{ErrorCode::kInternal,
              "the batch buffer's size overflows (batch size " + std::to_string(batch_size) + ")",
              "use a smaller batch `size`; the batch op's type rule should have "
              "caught this, so please report it",
              batch.mark});
    return;
  }
  graph.memory = std::move(plan);
}

}  // namespace sluice
