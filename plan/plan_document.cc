// PlanDocument <-> plan.json (see plan_document.h; keys in docs/plan.md).
#include "plan/plan_document.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/atomic_file.h"
#include "common/utf8.h"
#include "ops/fusion/plan_format.h"

namespace sluice {
namespace {

using json = nlohmann::json;
namespace pf = plan_format;

const char* kRecompile = "recompile it: sluice compile SPEC -o PLAN";

json StringOrNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

std::string StringOr(const json& j, const char* key, std::string fallback = "") {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

int64_t IntOr(const json& j, const char* key, int64_t fallback) {
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : fallback;
}

json StepsToJson(const std::vector<PlanStepDoc>& steps) {
  json out = json::array();
  for (const PlanStepDoc& s : steps) {
    out.push_back(json{{"op", s.op}, {"op_id", s.op_id}, {"params", s.params}});
  }
  return out;
}

json DecodeToJson(const PlanDecodeDoc& d) {
  return json{
      {"op", d.op},
      {"params", d.params},
      {"node", d.node},
      {"pushdown", json{{"roi", d.roi}, {"dct_scaling", d.dct_scaling}, {"reason", d.reason}}}};
}

json MemoryToJson(const PlanMemoryDoc& m) {
  json fields = json::array();
  for (const PlanFieldMemoryDoc& f : m.fields) {
    fields.push_back(json{{"field", f.field},
                          {"dtype", std::string(DTypeName(f.dtype))},
                          {"sample_shape", f.sample_shape},
                          {"bytes_per_sample", f.bytes_per_sample},
                          {"offset", f.offset},
                          {"staging_bytes_per_sample", f.staging_bytes_per_sample},
                          {"staged_offset", f.staged_offset}});
  }
  return json{{"batch_size", m.batch_size},
              {"fields", fields},
              {"batch_bytes", m.batch_bytes},
              {"staged_batch_bytes", m.staged_batch_bytes}};
}

// Reads plan.json for one document; every error names `where`.
class Reader {
 public:
  explicit Reader(const std::string& where) : where_(where) {}

  Error Corrupt(const std::string& why) const {
    return Error{ErrorCode::kCorruptData, where_ + ": plan.json " + why, kRecompile, {}};
  }
  // An error from reading a part (`what`): named, a version mismatch, with a hint.
  Error Context(Error e, const std::string& what) const {
    e.message = where_ + ": " + what + ": " + e.message;
    if (e.code == ErrorCode::kInvalidArgument) e.code = ErrorCode::kVersionMismatch;
    if (e.hint.empty()) e.hint = kRecompile;
    return e;
  }

  Result<std::vector<PlanStepDoc>> Steps(const json& steps, const std::string& what) const {
    std::vector<PlanStepDoc> out;
    for (const json& s : steps) {
      if (!s.is_object() || !s.contains("op") || !s["op"].is_string() || !s.contains("op_id") ||
          !s["op_id"].is_number_integer()) {
        return std::unexpected(Corrupt("has a step without op or op_id in " + what));
      }
      out.push_back(PlanStepDoc{s["op"].get<std::string>(), s["op_id"].get<int>(),
                                s.value("params", json::object())});
    }
    return out;
  }

  Result<TensorType> Type(const json& j, const std::string& what) const {
    auto type = pf::TypeFromJson(j);
    if (!type) return std::unexpected(Context(type.error(), what));
    return *type;
  }

  // Fills the fields a fusion group and a reference chain share (nodes,
  // input, output, input_type, output_type, steps) from `j`, which must hold
  // input_type, output_type and steps. Errors: Corrupt, naming `what`.
  template <typename Doc>
  Status ChainFields(const json& j, const std::string& what, Doc& d) const {
    d.nodes = j.value("nodes", json::array());
    d.input = StringOr(j, "input");
    d.output = StringOr(j, "output");
    auto input = Type(j["input_type"], what);
    if (!input) return std::unexpected(input.error());
    auto output = Type(j["output_type"], what);
    if (!output) return std::unexpected(output.error());
    d.input_type = *input;
    d.output_type = *output;
    auto steps = Steps(j["steps"], what);
    if (!steps) return std::unexpected(steps.error());
    d.steps = std::move(*steps);
    return Ok();
  }

  Result<PlanGroupDoc> Group(const json& g) const {
    if (!g.is_object() || !g.contains("symbol") || !g["symbol"].is_string() ||
        !g.contains("steps") || !g["steps"].is_array() || !g.contains("input_type") ||
        !g.contains("output_type")) {
      return std::unexpected(
          Corrupt("has a fusion group without symbol, steps, input_type or output_type"));
    }
    PlanGroupDoc d;
    d.symbol = g["symbol"].get<std::string>();
    const std::string what = "fusion group " + d.symbol;
    d.id = static_cast<int>(IntOr(g, "id", 0));
    d.cuda_symbol = StringOr(g, "cuda_symbol");
    SLUICE_RETURN_IF_ERROR(ChainFields(g, what, d));
    d.batch_field = StringOr(g, "batch_field");
    d.gpu_from = static_cast<int>(std::max<int64_t>(IntOr(g, "gpu_from", -1), -1));
    d.cpu_part_symbol = StringOr(g, "cpu_part_symbol");
    d.gpu_batch_symbol = StringOr(g, "gpu_batch_symbol");
    if (g.contains("staging_type") && g["staging_type"].is_object()) {
      auto staging = Type(g["staging_type"], what);
      if (!staging) return std::unexpected(staging.error());
      d.staging_type = *staging;
    }
    d.abi = g.value("abi", json());
    return d;
  }

  Result<PlanReferenceDoc> Reference(const json& r) const {
    if (!r.is_object() || !r.contains("batch_field") || !r["batch_field"].is_string()) {
      return std::unexpected(Corrupt("has a reference chain without batch_field"));
    }
    PlanReferenceDoc d;
    d.batch_field = r["batch_field"].get<std::string>();
    const std::string what = "the reference chain of batch field `" + d.batch_field + "`";
    if (!r.contains("steps") || !r["steps"].is_array() || r["steps"].empty() ||
        !r.contains("input_type") || !r.contains("output_type")) {
      return std::unexpected(Corrupt("has " + what + " without steps, input_type or output_type"));
    }
    d.symbol = StringOr(r, "symbol", "reference:" + d.batch_field);
    SLUICE_RETURN_IF_ERROR(ChainFields(r, what, d));
    d.reason = StringOr(r, "reason");
    return d;
  }

  Result<PlanDecodeDoc> Decode(const json& j) const {
    if (!j.is_object() || !j.contains("op") || !j["op"].is_string() ||
        !j.value("pushdown", json()).is_object()) {
      return std::unexpected(Corrupt("has a `decode` object without op or pushdown"));
    }
    PlanDecodeDoc d;
    d.op = j["op"].get<std::string>();
    d.params = j.value("params", json::object());
    d.node = static_cast<int>(IntOr(j, "node", -1));
    const json& p = j["pushdown"];
    d.roi = p.value("roi", json()).is_boolean() && p["roi"].get<bool>();
    d.dct_scaling = p.value("dct_scaling", json()).is_boolean() && p["dct_scaling"].get<bool>();
    d.reason = StringOr(p, "reason");
    return d;
  }

  Result<PlanMemoryDoc> Memory(const json& j) const {
    if (!j.is_object() || !j.value("fields", json()).is_array()) {
      return std::unexpected(Corrupt("has a `memory` object without fields"));
    }
    PlanMemoryDoc m;
    m.batch_size = IntOr(j, "batch_size", 0);
    m.batch_bytes = IntOr(j, "batch_bytes", 0);
    m.staged_batch_bytes = IntOr(j, "staged_batch_bytes", 0);
    for (const json& f : j["fields"]) {
      auto dtype = f.is_object() ? ParseDType(StringOr(f, "dtype")) : std::nullopt;
      if (!dtype || !f.value("sample_shape", json()).is_array()) {
        return std::unexpected(Corrupt("has a memory field without dtype or sample_shape"));
      }
      PlanFieldMemoryDoc d;
      d.field = StringOr(f, "field");
      d.dtype = *dtype;
      for (const json& e : f["sample_shape"]) {
        if (!e.is_number_integer()) {
          return std::unexpected(Corrupt("has a memory field with a non-integer sample_shape"));
        }
        d.sample_shape.push_back(e.get<int64_t>());
      }
      d.bytes_per_sample = IntOr(f, "bytes_per_sample", 0);
      d.offset = IntOr(f, "offset", 0);
      d.staging_bytes_per_sample = IntOr(f, "staging_bytes_per_sample", 0);
      d.staged_offset = IntOr(f, "staged_offset", 0);
      m.fields.push_back(std::move(d));
    }
    return m;
  }

  static PlanTunedDoc Tuned(const json& t) {
    PlanTunedDoc d;
    d.info = t;
    auto knob = [&](const char* name) {
      d.info.erase(name);
      if (!t.contains(name) || !t[name].is_number_integer()) return -1;
      // Saturated, not wrapped: the loader refuses values above its maxima.
      const int64_t v = t[name].get<int64_t>();
      return static_cast<int>(std::clamp<int64_t>(v, -1, std::numeric_limits<int>::max()));
    };
    d.threads = knob("threads");
    d.in_flight = knob("in_flight");
    d.prefetch = knob("prefetch");
    d.cpu_budget = knob("cpu_budget");
    if (t.contains("images_per_second") && t["images_per_second"].is_number()) {
      d.images_per_second = t["images_per_second"].get<double>();
    }
    d.info.erase("images_per_second");
    return d;
  }

 private:
  std::string where_;
};

}  // namespace

json PlanDocument::ToJson() const {
  json plan;
  plan["format_version"] = format_version;
  plan["compiler_version"] = compiler_version;
  plan["spec_hash"] = spec_hash;
  plan["spec_file"] = spec_file;
  plan["name"] = name;
  plan["source"] =
      json{{"format", source_format}, {"params", source_params}, {"outputs", source_outputs}};
  plan["sampling"] = sampling;
  plan["batch"] = batch;
  plan["output"] = output;
  plan["graph"] = graph;
  json groups = json::array();
  for (const PlanGroupDoc& g : fusion_groups) {
    groups.push_back(
        json{{"id", g.id},
             {"symbol", g.symbol},
             {"cuda_symbol", StringOrNull(g.cuda_symbol)},
             {"nodes", g.nodes},
             {"input", g.input},
             {"input_type", pf::TypeToJson(g.input_type)},
             {"output", g.output},
             {"output_type", pf::TypeToJson(g.output_type)},
             {"batch_field", g.batch_field},
             {"steps", StepsToJson(g.steps)},
             {"gpu_from", g.gpu_from},
             {"cpu_part_symbol", StringOrNull(g.cpu_part_symbol)},
             {"gpu_batch_symbol", StringOrNull(g.gpu_batch_symbol)},
             {"staging_type", g.staging_type ? pf::TypeToJson(*g.staging_type) : json(nullptr)},
             {"abi", g.abi}});
  }
  plan["fusion_groups"] = groups;
  json references = json::array();
  for (const PlanReferenceDoc& r : reference_chains) {
    references.push_back(json{{"batch_field", r.batch_field},
                              {"symbol", r.symbol},
                              {"nodes", r.nodes},
                              {"input", r.input},
                              {"input_type", pf::TypeToJson(r.input_type)},
                              {"output", r.output},
                              {"output_type", pf::TypeToJson(r.output_type)},
                              {"steps", StepsToJson(r.steps)},
                              {"reason", r.reason}});
  }
  plan["reference_chains"] = references;
  plan["kernels"] = json{{"file", kernels.file},
                         {"hash", kernels.hash},
                         {"bytes", kernels.bytes},
                         {"cpu_targets", kernels.cpu_targets},
                         {"cuda_target", StringOrNull(kernels.cuda_target)},
                         {"cuda_note", kernels.cuda_note}};
  json placed = placement.is_object() ? placement : json::object();
  placed["device"] = placement_device;
  plan["placement"] = placed;
  if (decode) plan["decode"] = DecodeToJson(*decode);
  if (memory) plan["memory"] = MemoryToJson(*memory);
  if (tuned) {
    json t = tuned->info.is_object() ? tuned->info : json::object();
    t["threads"] = tuned->threads;
    t["in_flight"] = tuned->in_flight;
    t["prefetch"] = tuned->prefetch;
    t["cpu_budget"] = tuned->cpu_budget;
    t["images_per_second"] = tuned->images_per_second;
    plan["tuned"] = t;
  }
  return plan;
}

Result<PlanDocument> PlanDocument::FromJson(const json& j, const std::string& where) {
  Reader read(where);
  if (!j.is_object()) return std::unexpected(read.Corrupt("is not valid JSON"));
  if (!j.contains("format_version") || !j["format_version"].is_number_integer()) {
    return std::unexpected(read.Corrupt("has no integer format_version"));
  }
  PlanDocument doc;
  doc.format_version = j["format_version"].get<int>();
  if (!j.contains("compiler_version") || !j["compiler_version"].is_string()) {
    return std::unexpected(read.Corrupt("has no compiler_version"));
  }
  doc.compiler_version = j["compiler_version"].get<std::string>();
  for (const char* key : {"name", "spec_hash"}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return std::unexpected(read.Corrupt(std::string("has no ") + key));
    }
  }
  for (const char* key : {"source", "sampling", "batch", "output", "kernels"}) {
    if (!j.contains(key) || !j[key].is_object()) {
      return std::unexpected(read.Corrupt(std::string("has no `") + key + "` object"));
    }
  }
  if (!j.contains("fusion_groups") || !j["fusion_groups"].is_array()) {
    return std::unexpected(read.Corrupt("has no fusion_groups array"));
  }
  doc.name = j["name"].get<std::string>();
  doc.spec_hash = j["spec_hash"].get<std::string>();
  doc.spec_file = StringOr(j, "spec_file");
  const json& src = j["source"];
  if (!src.contains("format") || !src["format"].is_string()) {
    return std::unexpected(read.Corrupt("has no source.format"));
  }
  doc.source_format = src["format"].get<std::string>();
  doc.source_params = src.value("params", json::object());
  doc.source_outputs = src.value("outputs", json::array());
  doc.sampling = j["sampling"];
  doc.batch = j["batch"];
  doc.output = j["output"];
  doc.graph = j.value("graph", json::object());

  for (const json& g : j["fusion_groups"]) {
    auto group = read.Group(g);
    if (!group) return std::unexpected(group.error());
    doc.fusion_groups.push_back(std::move(*group));
  }
  // Absent in plans from before reference chains: none.
  if (j.contains("reference_chains")) {
    if (!j["reference_chains"].is_array()) {
      return std::unexpected(read.Corrupt("has a non-array reference_chains"));
    }
    for (const json& r : j["reference_chains"]) {
      auto ref = read.Reference(r);
      if (!ref) return std::unexpected(ref.error());
      doc.reference_chains.push_back(std::move(*ref));
    }
  }

  const json& k = j["kernels"];
  if (!k.contains("hash") || !k["hash"].is_string() || !k.contains("cpu_targets") ||
      !k["cpu_targets"].is_array()) {
    return std::unexpected(read.Corrupt("has no kernels.hash or kernels.cpu_targets"));
  }
  doc.kernels.file = StringOr(k, "file", pf::kKernelsFile);
  doc.kernels.hash = k["hash"].get<std::string>();
  doc.kernels.bytes = IntOr(k, "bytes", 0);
  for (const json& t : k["cpu_targets"]) {
    if (t.is_string()) doc.kernels.cpu_targets.push_back(t.get<std::string>());
  }
  doc.kernels.cuda_target = StringOr(k, "cuda_target");
  doc.kernels.cuda_note = StringOr(k, "cuda_note");

  if (j.contains("placement") && j["placement"].is_object()) {
    doc.placement = j["placement"];
    doc.placement_device = StringOr(doc.placement, "device", "cpu");
  }
  if (j.contains("decode") && !j["decode"].is_null()) {
    auto decode = read.Decode(j["decode"]);
    if (!decode) return std::unexpected(decode.error());
    doc.decode = std::move(*decode);
  }
  if (j.contains("memory") && !j["memory"].is_null()) {
    auto memory = read.Memory(j["memory"]);
    if (!memory) return std::unexpected(memory.error());
    doc.memory = std::move(*memory);
  }
  // Knobs written by `sluice tune` (optional; absent in a freshly compiled plan).
  if (j.contains("tuned") && j["tuned"].is_object()) doc.tuned = Reader::Tuned(j["tuned"]);
  return doc;
}

Result<PlanDocument> PlanDocument::Read(const std::string& dir, const std::string& where) {
  const std::string path = (std::filesystem::path(dir) / pf::kPlanFile).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kNotFound, "cannot open `" + path + "`",
                     "pass the plan directory written by `sluice compile -o`");
  }
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return MakeError(ErrorCode::kCorruptData, "`" + path + "` is not a JSON object");
  }
  return FromJson(j, where);
}

namespace {

// The JSON path (a.b[2].c) of the first key or string in `j` that is not
// valid UTF-8, with that text in *text; "" when there is none.
std::string FirstNonUtf8(const json& j, const std::string& at, std::string* text) {
  if (j.is_string()) {
    if (IsValidUtf8(j.get_ref<const std::string&>())) return "";
    *text = j.get<std::string>();
    return at.empty() ? "(top)" : at;
  }
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      std::string found = FirstNonUtf8(j[i], at + "[" + std::to_string(i) + "]", text);
      if (!found.empty()) return found;
    }
  }
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      const std::string here = at.empty() ? key : at + "." + key;
      if (!IsValidUtf8(key)) {
        *text = key;
        return here;
      }
      std::string found = FirstNonUtf8(value, here, text);
      if (!found.empty()) return found;
    }
  }
  return "";
}

}  // namespace

namespace {

Status CorruptMemory(const std::string& where, const std::string& why) {
  return MakeError(ErrorCode::kCorruptData, where + ": plan.json \"memory\" " + why,
                   "recompile the plan with this Sluice (sluice compile)");
}

// CheckBatchLayout's finding: empty, or what follows `plan.json "memory" `.
std::string LayoutProblem(const std::vector<PlanFieldExtent>& fields, int64_t batch_size,
                          int64_t buffer_bytes) {
  if (buffer_bytes <= 0) return "has no batch size in bytes";
  if (batch_size <= 0) return "has no batch size";
  std::vector<std::pair<int64_t, int64_t>> extents;  // [offset, end) per field
  for (const PlanFieldExtent& f : fields) {
    if (f.offset < 0) return "gives batch field `" + f.field + "` a negative offset";
    int64_t bytes = 0, end = 0;
    if (f.bytes_per_sample < 0 || __builtin_mul_overflow(f.bytes_per_sample, batch_size, &bytes) ||
        __builtin_add_overflow(f.offset, bytes, &end) || end > buffer_bytes) {
      return "places batch field `" + f.field + "` outside the " + std::to_string(buffer_bytes) +
             "-byte batch buffer";
    }
    extents.emplace_back(f.offset, end);
  }
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].first < extents[i - 1].second) return "overlaps two batch fields";
  }
  return "";
}

}  // namespace

Status CheckBatchLayout(const std::vector<PlanFieldExtent>& fields, int64_t batch_size,
                        int64_t buffer_bytes, const std::string& where) {
  const std::string problem = LayoutProblem(fields, batch_size, buffer_bytes);
  if (!problem.empty()) return CorruptMemory(where, problem);
  return Ok();
}

Status CheckMemoryLayout(const std::optional<PlanMemoryDoc>& memory, const json& batch,
                         const std::string& where) {
  if (!memory) return CorruptMemory(where, "is missing");
  const PlanMemoryDoc& m = *memory;
  const json size = batch.value("size", json());
  std::vector<std::string> names;  // the batch's fields, in name order like "memory"'s
  if (const json f = batch.value("fields", json()); f.is_object()) {
    for (const auto& [name, tensor] : f.items()) names.push_back(name);
  }
  std::vector<std::string> planned;
  for (const PlanFieldMemoryDoc& f : m.fields) planned.push_back(f.field);
  if (!size.is_number_integer() || size.get<int64_t>() != m.batch_size || planned != names) {
    return CorruptMemory(where, "does not match the batch (size " + size.dump() + ", " +
                                    std::to_string(names.size()) + " fields)");
  }
  std::vector<PlanFieldExtent> cpu, staged;
  for (const PlanFieldMemoryDoc& f : m.fields) {
    cpu.push_back({f.field, f.offset, f.bytes_per_sample});
    staged.push_back(
        {f.field, f.staged_offset,
         f.staging_bytes_per_sample > 0 ? f.staging_bytes_per_sample : f.bytes_per_sample});
  }
  if (std::string p = LayoutProblem(cpu, m.batch_size, m.batch_bytes); !p.empty()) {
    return CorruptMemory(where, p);
  }
  if (std::string p = LayoutProblem(staged, m.batch_size, m.staged_batch_bytes); !p.empty()) {
    return CorruptMemory(where, "(GPU-staged layout) " + p);
  }
  return Ok();
}

Status PlanDocument::Write(const std::string& dir) const {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / pf::kPlanFile).string();
  const json doc = ToJson();
  std::string bad_text;
  if (const std::string at = FirstNonUtf8(doc, "", &bad_text); !at.empty()) {
    // JSON is UTF-8: a Latin-1 path (or spec location) cannot be written
    // faithfully, and a replaced byte would name another file.
    std::string shown;
    for (unsigned char ch : bad_text) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02X", ch);
      shown += ch < 0x80 ? std::string(1, static_cast<char>(ch)) : std::string(hex);
    }
    return MakeError(ErrorCode::kInvalidArgument,
                     "the plan's `" + at + "` is not valid UTF-8 (`" + shown +
                         "`); plan.json must be UTF-8",
                     "use UTF-8 paths and names in the spec (rename the file or directory, or "
                     "pass the path through a ${VARIABLE} at run time)");
  }
  // Whole or not at all, durably, and safe against a concurrent writer
  // (`sluice compile` and `sluice tune` of the same plan).
  return WriteFileAtomically(path, doc.dump(2) + "\n");
}

}  // namespace sluice
