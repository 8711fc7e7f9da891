// The batch op: stacks per-sample tensors into batch tensors. The spec's
// `batch: {size: N, fields: {out_name: tensor_name, ...}}` is one `batch` node
// whose inputs are the fields' tensors in the order of `fields` (a map, so
// sorted by output field name) and whose outputs are named by the fields'
// keys, in the same order (hence `output_names` is empty here).
#include "ops/families.h"

namespace sluice {
namespace {

using namespace ops_internal;

// The most one batch buffer may hold (all fields, 64-byte aligned blocks, as
// the memory_planning pass lays them out). A loader keeps several buffers in
// flight, so a batch past this is a mistake in `size` (or in a field's shape),
// not a workload.
constexpr int64_t kMaxBatchBytes = int64_t{64} << 30;  // 64 GiB

// Adds the 64-byte-aligned block of `size` samples of `t` to `total`; false
// when the sum overflows or passes kMaxBatchBytes.
bool AddBlock(const TensorType& t, int64_t size, int64_t& total) {
  int64_t n = DTypeSize(t.dtype);
  for (int64_t d : t.dims) {
    if (__builtin_mul_overflow(n, d, &n)) return false;
  }
  if (__builtin_mul_overflow(n, size, &n) || n > kMaxBatchBytes) return false;
  total += (n + 63) / 64 * 64;
  return total <= kMaxBatchBytes;
}

Result<std::vector<TensorType>> InferBatch(std::span<const TensorType> inputs,
                                           const ParamList& params) {
  const int64_t size = P(params, "size").AsInt();
  const auto& fields = P(params, "fields").AsStringMap();
  if (inputs.size() != fields.size()) {
    return MakeError(ErrorCode::kInvalidSpec, "`batch` has " + std::to_string(fields.size()) +
                                                  " fields but got " +
                                                  std::to_string(inputs.size()) + " input tensors");
  }
  std::vector<TensorType> out;
  int64_t batch_bytes = 0;
  auto field = fields.begin();
  for (const TensorType& t : inputs) {
    const std::string where = "batch field `" + field->first + "` (tensor `" + field->second + "`)";
    if (t.encoded()) {
      return MakeError(ErrorCode::kInvalidSpec,
                       where + " is encoded bytes (" + t.ToString() + ") and cannot be batched",
                       "decode it first (add decode_jpeg to the graph)");
    }
    if (!t.is_static()) {
      return MakeError(ErrorCode::kInvalidSpec,
                       where + " has dynamic extents (" + t.ToString() +
                           "); every sample in a batch must have the same shape",
                       "add a resize with an exact size, a crop, center_crop or "
                       "random_resized_crop before batching");
    }
    if (!AddBlock(t, size, batch_bytes)) {
      return MakeError(ErrorCode::kInvalidSpec,
                       "a batch of " + std::to_string(size) + " samples needs more than " +
                           std::to_string(kMaxBatchBytes) + " bytes (64 GiB) per batch buffer; " +
                           where + " is " + t.ToString() + " per sample",
                       "use a smaller batch `size` (typical: 32 to 1024) or smaller samples");
    }
    TensorType b = t;
    b.dims.insert(b.dims.begin(), size);
    out.push_back(std::move(b));
    ++field;
  }
  return out;
}

}  // namespace

void RegisterBatchOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .name = "batch",
      .op_class = OpClass::kBatch,
      .doc = "Stacks `size` samples into one batch: each field's tensor gains a leading batch "
             "dimension. Every field must have a static shape.",
      .params =
          {
              ParamDef{.name = "size",
                       .type = ParamType::kInt,
                       .doc = "Samples per batch.",
                       .required = true,
                       .min = 1},
              ParamDef{.name = "fields",
                       .type = ParamType::kStringMap,
                       .doc = "Batch field name -> per-sample tensor name, e.g. {image: image, "
                              "label: cls}.",
                       .required = true},
          },
      .output_names = {},
      .num_inputs = -1,
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            if (P(p, "fields").AsStringMap().empty()) {
              issues.push_back(
                  {"fields", "batch has no fields",
                   "name at least one tensor, e.g. fields: {image: image, label: cls}"});
            }
            return issues;
          },
      .infer = InferBatch,
  });
}

}  // namespace sluice
