// Pass `type_inference`: gives every value its TensorType.
//
// Walks the nodes in (topological) order and asks each op's registry `infer`
// rule for its output types given its input types: dtype, rank, layout and
// each extent, static or dynamic (`?`). The per-op rules live in the registry;
// this pass only threads types through the graph. So, for the ImageNet train
// chain, bytes[?] -> uint8[?,?,3] HWC -> uint8[224,224,3] HWC -> ... ->
// float16[3,224,224] CHW, and the batch gives float16[256,3,224,224] CHW.
//
// Rewrites: Value::type only (and Graph::typed once every value is typed).
// Errors: an `infer` rejection (say, normalize with 3 means on a 1-channel
// image) becomes a diagnostic at the node's source mark with the rule's message
// and hint; that node's outputs stay untyped, and any node with an untyped
// input is skipped silently (all of its outputs stay untyped: for the batch,
// every field), so one mistake gives one message, not a cascade.
//
// Limits: a static per-sample tensor (any op but `batch`) may hold at most
// kMaxSampleBytes = 2^31-1 bytes, the most one Halide buffer may hold; a
// larger one is an error at the node's mark (the run would abort in Halide).
// Extents are multiplied with overflow checks. The batch buffer's bound is the
// `batch` op's rule (ops/batch_ops.cc).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "compiler/passes/pass.h"

namespace sluice {
namespace {

constexpr int64_t kMaxSampleBytes = std::numeric_limits<int32_t>::max();

// The bytes of a static tensor, or nullopt when the product overflows.
std::optional<int64_t> StaticBytes(const TensorType& t) {
  int64_t n = DTypeSize(t.dtype);
  for (int64_t d : t.dims) {
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// An error when a per-sample output of `node` is over kMaxSampleBytes.
std::optional<Error> SampleTooLarge(const Node& node, const TensorType& t) {
  if (node.op->op_class == OpClass::kBatch || !t.is_static() || t.encoded()) return std::nullopt;
  const std::optional<int64_t> bytes = StaticBytes(t);
  if (bytes && *bytes <= kMaxSampleBytes) return std::nullopt;
  return Error{ErrorCode::kInvalidSpec,
               "`" + node.op->name + "` makes " + t.ToString() + ", " +
                   (bytes ? std::to_string(*bytes) + " bytes" : std::string("over 2^63 bytes")) +
                   " per sample; a sample may hold at most " + std::to_string(kMaxSampleBytes) +
                   " bytes (2^31-1, the most one Halide buffer holds)",
               "make the image smaller before this step (a smaller size, crop or padding)",
               node.mark};
}

}  // namespace

void InferTypes(Graph& graph, Diagnostics& diags) {
  for (Node& node : graph.nodes) {
    if (node.op == nullptr) continue;
    std::vector<TensorType> inputs;
    bool all_typed = true;
    for (ValueId in : node.inputs) {
      const Value& value = graph.value(in);
      if (!value.type) {
        all_typed = false;
        break;
      }
      inputs.push_back(*value.type);
    }
    if (!all_typed) continue;  // an earlier error already explains this
    for (ValueId out : node.outputs) graph.value(out).type.reset();

    if (!node.op->infer) {
      diags.Add(Error{ErrorCode::kInternal, "op `" + node.op->name + "` has no type rule",
                      "this is a bug in Sluice's op registry", node.mark});
      continue;
    }
    Result<std::vector<TensorType>> result = node.op->infer(inputs, node.params);
    if (!result) {
      Error error = std::move(result).error();
      if (!error.mark.valid()) error.mark = node.mark;
      diags.Add(std::move(error));
      continue;
    }
    if (result->size() != node.outputs.size()) {
      diags.Add(Error{ErrorCode::kInternal,
                      "op `" + node.op->name + "` gave " + std::to_string(result->size()) +
                          " output types for " + std::to_string(node.outputs.size()) + " outputs",
                      "this is a bug in Sluice's op registry", node.mark});
      continue;
    }
    bool fits = true;
    for (const TensorType& t : *result) {
      if (std::optional<Error> error = SampleTooLarge(node, t)) {
        diags.Add(std::move(*error));
        fits = false;
        break;
      }
    }
    if (!fits) continue;
    for (size_t i = 0; i < result->size(); ++i) graph.value(node.outputs[i]).type = (*result)[i];
  }

  bool all = true;
  for (const Value& value : graph.values) all = all && value.type.has_value();
  graph.typed = all;
}

}  // namespace sluice
