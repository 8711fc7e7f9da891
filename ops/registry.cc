#include "ops/registry.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "ops/families.h"

namespace sluice {
namespace {

using ops_internal::VFloat;
using ops_internal::VInt;
using ops_internal::VStr;

// Names of required parameters of `defs` missing from `params`.
std::vector<std::string> MissingRequired(const std::vector<ParamDef>& defs,
                                         const ParamList& params) {
  std::vector<std::string> missing;
  for (const ParamDef& def : defs) {
    if (def.required && !params.contains(def.name)) missing.push_back(def.name);
  }
  return missing;
}

// Wraps an op's functions so they always see defaults filled, and so a missing
// required parameter is an error rather than a crash.
void WrapWithDefaults(OpDef& op) {
  const std::vector<ParamDef> defs = op.params;
  const std::string name = op.name;
  auto missing_error = [name](const std::string& param) {
    return MakeError(ErrorCode::kInvalidSpec,
                     "`" + name + "` is missing required parameter `" + param + "`",
                     "add `" + param + ":` to the step");
  };
  if (op.check) {
    auto inner = std::move(op.check);
    op.check = [defs, name, inner](const ParamList& params) -> std::vector<ParamIssue> {
      ParamList full = WithDefaults(defs, params);
      std::vector<ParamIssue> issues;
      for (const std::string& m : MissingRequired(defs, full)) {
        issues.push_back({m, "`" + name + "` is missing required parameter `" + m + "`",
                          "add `" + m + ":` to the step"});
      }
      if (!issues.empty()) return issues;
      return inner(full);
    };
  } else {
    op.check = [defs, name](const ParamList& params) -> std::vector<ParamIssue> {
      std::vector<ParamIssue> issues;
      for (const std::string& m : MissingRequired(defs, WithDefaults(defs, params))) {
        issues.push_back({m, "`" + name + "` is missing required parameter `" + m + "`",
                          "add `" + m + ":` to the step"});
      }
      return issues;
    };
  }
  if (op.infer) {
    auto inner = std::move(op.infer);
    op.infer = [defs, inner, missing_error](
                   std::span<const TensorType> inputs,
                   const ParamList& params) -> Result<std::vector<TensorType>> {
      ParamList full = WithDefaults(defs, params);
      for (const std::string& m : MissingRequired(defs, full)) return missing_error(m);
      return inner(inputs, full);
    };
  }
  if (op.reference) {
    auto inner = std::move(op.reference);
    op.reference = [defs, inner, missing_error](const RefTensor& in, const ParamList& params,
                                                RefContext& ctx) -> Result<RefTensor> {
      ParamList full = WithDefaults(defs, params);
      for (const std::string& m : MissingRequired(defs, full)) return missing_error(m);
      return inner(in, full, ctx);
    };
  }
}

// Parameters every source op has, appended by the registry to each
// OpClass::kSource op, so a new source gets them without listing them:
// `read_timeout` (seconds; the loader's read deadline, runtime/exec/read_pool.h,
// which takes the default from here through FindOp).
const std::vector<ParamDef>& SourceCommonParams() {
  static const std::vector<ParamDef> params = {
      ParamDef{.name = "read_timeout",
               .type = ParamType::kFloat,
               .doc = "Seconds one sample's read may take; a read still running then is "
                      "abandoned and the sample is bad (on_error decides). 0 = no deadline.",
               .default_value = VFloat(30.0),
               .min = 0.0},
  };
  return params;
}

struct Registry {
  std::vector<OpDef> defs;
  std::vector<const OpDef*> by_name;

  Registry() {
    RegisterSourceOps(defs);
    RegisterBatchOps(defs);
    RegisterDecodeOps(defs);
    RegisterGeometryOps(defs);
    RegisterColorOps(defs);
    RegisterPointwiseOps(defs);
    for (OpDef& op : defs) {
      if (op.op_class == OpClass::kSource) {
        for (const ParamDef& p : SourceCommonParams()) op.params.push_back(p);
      }
      WrapWithDefaults(op);
      // Class defaults of the cost terms (see OpCost).
      if (op.cost.resample_px == 0 && op.cost.pointwise_elem == 0) {
        if (op.op_class == OpClass::kResample) op.cost.resample_px = 1;
        if (op.op_class == OpClass::kPointwise) op.cost.pointwise_elem = 1;
      }
    }
    for (const OpDef& op : defs) by_name.push_back(&op);
    std::sort(by_name.begin(), by_name.end(),
              [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  }
};

const Registry& GetRegistry() {
  static const Registry registry;
  return registry;
}

// Optimal string alignment distance (Damerau-Levenshtein with adjacent
// transpositions), case-insensitive.
size_t EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::string_view OpClassName(OpClass op_class) {
  switch (op_class) {
    case OpClass::kSource:
      return "source";
    case OpClass::kDecode:
      return "decode";
    case OpClass::kResample:
      return "resample";
    case OpClass::kPointwise:
      return "pointwise";
    case OpClass::kBatch:
      return "batch";
    case OpClass::kDevice:
      return "device";
  }
  return "?";
}

std::span<const OpDef* const> AllOps() { return GetRegistry().by_name; }

const OpDef* FindOp(std::string_view name) {
  for (const OpDef* op : GetRegistry().by_name) {
    if (op->name == name) return op;
  }
  return nullptr;
}

std::vector<const OpDef*> OpsOfClass(OpClass op_class) {
  std::vector<const OpDef*> out;
  for (const OpDef* op : GetRegistry().by_name) {
    if (op->op_class == op_class) out.push_back(op);
  }
  return out;
}

const std::vector<ParamDef>& SamplingParams() {
  static const std::vector<ParamDef> params = {
      ParamDef{.name = "order",
               .type = ParamType::kEnum,
               .doc = "Visit order: shuffle (a global permutation per epoch; needs random "
                      "access), shard_shuffle (for sharded sources such as tar_shards: shards in "
                      "a new random order each epoch, each rank reads a contiguous run of them "
                      "sequentially through a shuffle buffer of shuffle_buffer samples), "
                      "sequential. See docs/datasets.md.",
               .default_value = VStr("shuffle"),
               .choices = {"shuffle", "shard_shuffle", "sequential"}},
      ParamDef{.name = "seed",
               .type = ParamType::kInt,
               .doc = "Seed of the shuffle and of every random op; same seed, same batches.",
               .default_value = VInt(0),
               .min = 0},
      ParamDef{.name = "sharding",
               .type = ParamType::kEnum,
               .doc = "auto: split samples by RANK / WORLD_SIZE from the environment (or the "
                      "explicit rank/world_size); none: every process reads every sample.",
               .default_value = VStr("auto"),
               .choices = {"auto", "none"}},
      ParamDef{.name = "rank",
               .type = ParamType::kAutoInt,
               .doc = "This process's shard; auto reads RANK from the environment (0 if unset).",
               .default_value = VInt(-1),
               .min = 0},
      ParamDef{.name = "world_size",
               .type = ParamType::kAutoInt,
               .doc = "Number of shards; auto reads WORLD_SIZE from the environment (1 if "
                      "unset).",
               .default_value = VInt(-1),
               .min = 1},
      ParamDef{.name = "remainder",
               .type = ParamType::kEnum,
               .doc = "Samples left over after the last full batch: drop them, or pad the last "
                      "batch by repeating samples so every rank gets the same batch count.",
               .default_value = VStr("drop"),
               .choices = {"drop", "pad"}},
      ParamDef{.name = "shuffle_buffer",
               .type = ParamType::kInt,
               .doc = "order: shard_shuffle only: how many samples the shuffle buffer mixes "
                      "over. It holds sample numbers (4 bytes each), not data; reads stay within "
                      "the shards of the last few buffer lengths. Larger mixes better (use at "
                      "least a few shards' worth); 1 reads the shards in order.",
               .default_value = VInt(10000),
               .min = 1},
  };
  return params;
}

const std::vector<ParamDef>& OutputParams() {
  static const std::vector<ParamDef> params = [] {
    std::vector<ParamDef> on_error_fields = {
        ParamDef{.name = "policy",
                 .type = ParamType::kEnum,
                 .doc = "What a corrupt or missing sample does: skip it, replace it with "
                        "another sample (deterministically), or fail with its path.",
                 .default_value = VStr("skip"),
                 .choices = {"skip", "replace", "fail"}},
        ParamDef{.name = "max_fraction",
                 .type = ParamType::kFloat,
                 .doc = "Fail anyway once more than this fraction of samples was bad.",
                 .default_value = VFloat(0.001),
                 .min = 0.0,
                 .max = 1.0},
    };
    ParamList on_error_default;
    for (const ParamDef& f : on_error_fields) on_error_default[f.name] = *f.default_value;
    // The maxima are LoaderOptions::kMaxThreads, kMaxPrefetch, kMaxInFlight
    // (include/sluice/loader.h), which the loader checks again.
    auto knob = [](std::string name, std::string doc, double max) {
      return ParamDef{.name = std::move(name),
                      .type = ParamType::kAutoInt,
                      .doc = std::move(doc),
                      .default_value = VInt(-1),
                      .min = 1,
                      .max = max};
    };
    return std::vector<ParamDef>{
        ParamDef{.name = "device",
                 .type = ParamType::kString,
                 .doc = "Where batches are delivered and GPU stages run: auto (cost model "
                        "decides), cpu, cuda or cuda:N.",
                 .default_value = VStr("auto")},
        knob("cpu_budget", "CPU cores the loader may use; auto leaves the rest to the trainer.",
             4096),
        knob("threads",
             "Worker threads; auto lets the tuner pick within cpu_budget, else one per "
             "CPU this process may use (its CPU affinity, capped by its cgroup's CPU "
             "quota).",
             4096),
        knob("prefetch", "Finished batches queued ahead of the trainer; auto tunes it.", 1024),
        knob("in_flight", "Samples being processed at once (bounds memory); auto tunes it.",
             65536),
        ParamDef{.name = "ordering",
                 .type = ParamType::kEnum,
                 .doc = "strict: batches in sampling order; relaxed: a batch may be delivered "
                        "as soon as it is full (same contents, order may vary; a saved "
                        "loader state lists the batches delivered ahead, so resuming "
                        "repeats none).",
                 .default_value = VStr("strict"),
                 .choices = {"strict", "relaxed"}},
        ParamDef{.name = "on_error",
                 .type = ParamType::kSection,
                 .doc = "Bad-data policy: {policy: skip|replace|fail, max_fraction: 0.001}.",
                 .default_value = ParamValue{on_error_default},
                 .fields = on_error_fields},
    };
  }();
  return params;
}

Status CheckDeviceString(const std::string& device) {
  if (device == "auto" || device == "cpu" || device == "cuda") return Ok();
  if (device.starts_with("cuda:") && device.size() > 5) {
    const char* first = device.data() + 5;
    const char* last = device.data() + device.size();
    bool digits = std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; });
    int n = 0;
    auto [ptr, ec] = std::from_chars(first, last, n);
    if (digits && ec == std::errc() && ptr == last) return Ok();
  }
  return MakeError(ErrorCode::kInvalidSpec, "unknown device `" + device + "`",
                   "use auto, cpu, cuda or cuda:N (N = GPU index, e.g. cuda:0)");
}

std::vector<ParamIssue> CheckSamplingParams(const ParamList& given) {
  const ParamList params = WithDefaults(SamplingParams(), given);
  std::vector<ParamIssue> issues;
  const int64_t rank = params.at("rank").AsInt();
  const int64_t world = params.at("world_size").AsInt();
  if (params.at("sharding").AsString() == "none" && (rank != -1 || world != -1)) {
    issues.push_back({rank != -1 ? "rank" : "world_size",
                      "rank and world_size have no effect with sharding: none",
                      "remove them, or use sharding: auto"});
  }
  if (rank != -1 && world != -1 && rank >= world) {
    issues.push_back(
        {"rank",
         "rank " + std::to_string(rank) + " is not less than world_size " + std::to_string(world),
         "ranks count from 0 to world_size - 1"});
  }
  return issues;
}

std::vector<ParamIssue> CheckOutputParams(const ParamList& given) {
  const ParamList params = WithDefaults(OutputParams(), given);
  std::vector<ParamIssue> issues;
  if (auto st = CheckDeviceString(params.at("device").AsString()); !st) {
    issues.push_back({"device", st.error().message, st.error().hint});
  }
  return issues;
}

ParamList WithDefaults(const std::vector<ParamDef>& defs, ParamList params) {
  for (const ParamDef& def : defs) {
    auto it = params.find(def.name);
    if (def.type == ParamType::kSection) {
      if (it != params.end() && std::holds_alternative<ParamList>(it->second.value)) {
        it->second.value = WithDefaults(def.fields, std::get<ParamList>(it->second.value));
      } else if (it == params.end()) {
        if (def.default_value) {
          params.emplace(def.name, *def.default_value);
        } else {
          ParamList filled = WithDefaults(def.fields, {});
          if (!filled.empty()) params.emplace(def.name, ParamValue{filled});
        }
      }
      continue;
    }
    if (it == params.end() && def.default_value) params.emplace(def.name, *def.default_value);
  }
  return params;
}

std::string DidYouMean(std::string_view name, const std::vector<std::string>& candidates) {
  const size_t threshold = std::max<size_t>(1, name.size() / 3);
  std::string best;
  size_t best_distance = threshold + 1;
  for (const std::string& c : candidates) {
    const size_t dist = EditDistance(name, c);
    if (dist > threshold) continue;
    // Closest wins; ties go to the alphabetically first name, so the answer
    // does not depend on the order of `candidates`.
    if (dist < best_distance || (dist == best_distance && c < best)) {
      best = c;
      best_distance = dist;
    }
  }
  return best;
}

namespace ops_internal {

Status ExpectNumInputs(std::string_view op, std::span<const TensorType> inputs, int n) {
  if (static_cast<int>(inputs.size()) == n) return Ok();
  return MakeError(ErrorCode::kInvalidSpec,
                   "`" + std::string(op) + "` takes " + std::to_string(n) +
                       (n == 1 ? " input" : " inputs") + ", got " + std::to_string(inputs.size()),
                   n == 1 ? "give one tensor name in `in:`" : "");
}

Status ExpectImage(std::string_view op, const TensorType& t) {
  const std::string name(op);
  if (t.encoded()) {
    return MakeError(
        ErrorCode::kInvalidSpec,
        "`" + name + "` expects a decoded image, got encoded bytes (" + t.ToString() + ")",
        "add `decode_jpeg` before it");
  }
  if (t.rank() != 3 || (t.layout != Layout::kHWC && t.layout != Layout::kCHW)) {
    return MakeError(
        ErrorCode::kInvalidSpec,
        "`" + name + "` expects a decoded image (rank 3, HWC or CHW), got " + t.ToString(),
        "apply it to an image tensor such as the output of decode_jpeg");
  }
  if (t.dtype != DType::kUInt8 && !IsFloat(t.dtype)) {
    return MakeError(ErrorCode::kInvalidSpec,
                     "`" + name + "` expects a uint8 or float image, got " + t.ToString(),
                     "cast it to uint8 or float32 first");
  }
  return Ok();
}

Status ExpectHWCImage(std::string_view op, const TensorType& t) {
  SLUICE_RETURN_IF_ERROR(ExpectImage(op, t));
  if (t.layout != Layout::kHWC) {
    return MakeError(ErrorCode::kInvalidSpec,
                     "`" + std::string(op) + "` expects an HWC image, got " + t.ToString(),
                     "move `layout: {to: CHW}` after the geometry ops (resize, crops, flip, pad)");
  }
  return Ok();
}

std::string FloatsText(const std::vector<double>& v) { return ParamValue{v}.ToString(); }

}  // namespace ops_internal
}  // namespace sluice
