// Plan::Load: reading and checking a compiled plan (see include/sluice/plan.h).
#include "sluice/plan.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ops/fusion/plan_format.h"
#include "ops/registry.h"
#include "runtime/kernels/kernel_library.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
namespace pf = plan_format;

const char* kRecompile = "recompile it: sluice compile SPEC -o PLAN";

// "0.1" from "0.1.0": plans are compatible within a major.minor series.
std::string MajorMinor(const std::string& version) {
  size_t first = version.find('.');
  if (first == std::string::npos) return version;
  size_t second = version.find('.', first + 1);
  return version.substr(0, second);
}


}  // namespace

Result<std::string> BindVariables(const std::string& text, const PlanVars& vars,
                                  const std::string& what) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t start = text.find("${", pos);
    if (start == std::string::npos) break;
    size_t end = text.find('}', start + 2);
    if (end == std::string::npos) {
      return MakeError(ErrorCode::kInvalidArgument,
                       what + " `" + text + "` has an unterminated `${`",
                       "write ${NAME}; recompile the plan after fixing the spec");
    }
    std::string name = text.substr(start + 2, end - start - 2);
    auto it = vars.find(name);
    if (it == vars.end()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "variable ${" + name + "} in " + what + " `" + text + "` is not bound",
                       "bind it when loading: --var " + name + "=VALUE (C++: Plan::Load(path, {{\"" +
                           name + "\", ...}}))");
    }
    out += text.substr(pos, start - pos) + it->second;
    pos = end + 1;
  }
  return out + text.substr(pos);
}

Result<Plan> Plan::Load(const std::string& path, const PlanVars& vars) {
  const std::string where = "plan `" + path + "`";
  auto corrupt = [&](const std::string& why) {
    return MakeError(ErrorCode::kCorruptData, where + ": plan.json " + why, kRecompile);
  };
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return MakeError(ErrorCode::kNotFound, where + " is not a directory",
                     "a plan is the directory written by sluice compile SPEC -o PLAN");
  }
  const fs::path dir(path);
  std::ifstream in(dir / pf::kPlanFile, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kNotFound, where + " has no plan.json",
                     "a plan is the directory written by sluice compile SPEC -o PLAN");
  }
  std::ostringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("is not valid JSON");

  // Versions first: a plan from another format may not have the fields below.
  if (!j.contains("format_version") || !j["format_version"].is_number_integer()) {
    return corrupt("has no integer format_version");
  }
  const int format = j["format_version"].get<int>();
  if (format != pf::kFormatVersion) {
    return MakeError(ErrorCode::kVersionMismatch,
                     where + " has plan format version " + std::to_string(format) +
                         ", but this Sluice (" + SLUICE_VERSION + ") reads version " +
                         std::to_string(pf::kFormatVersion),
                     std::string(kRecompile) + " with this version of sluice");
  }
  if (!j.contains("compiler_version") || !j["compiler_version"].is_string()) {
    return corrupt("has no compiler_version");
  }
  Plan plan;
  plan.path_ = path;
  plan.compiler_version_ = j["compiler_version"].get<std::string>();
  if (MajorMinor(plan.compiler_version_) != MajorMinor(SLUICE_VERSION)) {
    return MakeError(ErrorCode::kVersionMismatch,
                     where + " was compiled by sluice " + plan.compiler_version_ +
                         "; this runtime is " + SLUICE_VERSION +
                         " (plans are compatible within a major.minor version)",
                     std::string(kRecompile) + " with this version of sluice");
  }

  for (const char* key : {"name", "spec_hash"}) {
    if (!j.contains(key) || !j[key].is_string()) return corrupt(std::string("has no ") + key);
  }
  for (const char* key : {"source", "sampling", "batch", "output", "kernels"}) {
    if (!j.contains(key) || !j[key].is_object()) {
      return corrupt(std::string("has no `") + key + "` object");
    }
  }
  if (!j.contains("fusion_groups") || !j["fusion_groups"].is_array()) {
    return corrupt("has no fusion_groups array");
  }
  plan.name_ = j["name"].get<std::string>();
  plan.spec_hash_ = j["spec_hash"].get<std::string>();

  // Parameters, read back against this Sluice's registry.
  auto context = [&](Error e, const std::string& what) {
    e.message = where + ": " + what + ": " + e.message;
    if (e.code == ErrorCode::kInvalidArgument) e.code = ErrorCode::kVersionMismatch;
    if (e.hint.empty()) e.hint = kRecompile;
    return std::unexpected(std::move(e));
  };
  const json& src = j["source"];
  if (!src.contains("format") || !src["format"].is_string()) return corrupt("has no source.format");
  plan.source_format_ = src["format"].get<std::string>();
  const OpDef* source_op = FindOp(plan.source_format_);
  if (source_op == nullptr || source_op->op_class != OpClass::kSource) {
    return MakeError(ErrorCode::kVersionMismatch,
                     where + " reads source format `" + plan.source_format_ +
                         "`, which this Sluice does not know",
                     kRecompile);
  }
  auto source_params = pf::ParamsFromJson(source_op->params, src.value("params", json::object()));
  if (!source_params) return context(source_params.error(), "source");
  for (auto& [name, value] : *source_params) {
    if (!std::holds_alternative<std::string>(value.value)) continue;
    auto bound = BindVariables(value.AsString(), vars, "source." + name);
    if (!bound) {
      Error e = bound.error();
      e.message = where + ": " + e.message;
      return std::unexpected(std::move(e));
    }
    value.value = *bound;
  }
  plan.source_params_ = std::move(*source_params);

  auto sampling = pf::ParamsFromJson(SamplingParams(), j["sampling"]);
  if (!sampling) return context(sampling.error(), "sampling");
  plan.sampling_ = std::move(*sampling);
  auto output = pf::ParamsFromJson(OutputParams(), j["output"]);
  if (!output) return context(output.error(), "output");
  plan.output_ = std::move(*output);
  const OpDef* batch_op = FindOp("batch");
  if (batch_op == nullptr) return MakeError(ErrorCode::kInternal, "the registry has no `batch` op");
  auto batch = pf::ParamsFromJson(batch_op->params, j["batch"]);
  if (!batch) return context(batch.error(), "batch");
  plan.batch_ = std::move(*batch);

  // A chain's steps, read against this Sluice's registry.
  auto read_steps = [&](const json& steps, const std::string& what,
                        std::vector<ChainStep>& out) -> Status {
    for (const json& s : steps) {
      if (!s.is_object() || !s.contains("op") || !s["op"].is_string() || !s.contains("op_id") ||
          !s["op_id"].is_number_integer()) {
        return corrupt("has a step without op or op_id in " + what);
      }
      const std::string op_name = s["op"].get<std::string>();
      const OpDef* op = FindOp(op_name);
      if (op == nullptr) {
        return MakeError(ErrorCode::kVersionMismatch,
                         where + " uses op `" + op_name + "`, which this Sluice does not know",
                         kRecompile);
      }
      auto params = pf::ParamsFromJson(op->params, s.value("params", json::object()));
      if (!params) return context(params.error(), what + ": op " + op_name);
      out.push_back(ChainStep{op, std::move(*params), s["op_id"].get<int>()});
    }
    return Ok();
  };

  // Fusion groups -> FusedChains.
  for (const json& g : j["fusion_groups"]) {
    if (!g.is_object() || !g.contains("symbol") || !g["symbol"].is_string() ||
        !g.contains("steps") || !g["steps"].is_array() || !g.contains("input_type") ||
        !g.contains("output_type")) {
      return corrupt("has a fusion group without symbol, steps, input_type or output_type");
    }
    FusedChain chain;
    chain.symbol = g["symbol"].get<std::string>();
    auto input = pf::TypeFromJson(g["input_type"]);
    if (!input) return context(input.error(), "fusion group " + chain.symbol);
    auto output_type = pf::TypeFromJson(g["output_type"]);
    if (!output_type) return context(output_type.error(), "fusion group " + chain.symbol);
    chain.input = *input;
    chain.output = *output_type;
    SLUICE_RETURN_IF_ERROR(read_steps(g["steps"], "fusion group " + chain.symbol, chain.steps));
    // The GPU split (absent in plans from before placement; null fields = none).
    std::optional<GpuStage> stage;
    if (g.contains("gpu_from") && g["gpu_from"].is_number_integer() &&
        g["gpu_from"].get<int>() >= 0) {
      chain.gpu_from = g["gpu_from"].get<int>();
      if (chain.gpu_from >= static_cast<int>(chain.steps.size())) {
        return corrupt("fusion group " + chain.symbol + " has gpu_from past its steps");
      }
      const bool has_symbols = g.value("cpu_part_symbol", json()).is_string() &&
                               g.value("gpu_batch_symbol", json()).is_string() &&
                               g.contains("staging_type") && g["staging_type"].is_object();
      if (has_symbols) {
        GpuStage st;
        st.gpu_from = chain.gpu_from;
        st.cpu_part_symbol = g["cpu_part_symbol"].get<std::string>();
        st.gpu_batch_symbol = g["gpu_batch_symbol"].get<std::string>();
        auto staging = pf::TypeFromJson(g["staging_type"]);
        if (!staging) return context(staging.error(), "fusion group " + chain.symbol);
        st.staging = *staging;
        if (st.cpu_part_symbol.empty() || st.gpu_batch_symbol.empty() || !st.staging.is_static() ||
            st.staging.dtype != DType::kUInt8 || st.staging.layout != Layout::kHWC) {
          return corrupt("fusion group " + chain.symbol +
                         " has an invalid GPU stage (symbols or a static uint8 HWC staging_type)");
        }
        stage = std::move(st);
      }
    }
    plan.chains_.push_back(std::move(chain));
    plan.gpu_stages_.push_back(std::move(stage));
    plan.chain_fields_.push_back(g.value("batch_field", std::string()));
  }

  // Reference chains (absent in plans from before them: none).
  if (j.contains("reference_chains")) {
    if (!j["reference_chains"].is_array()) return corrupt("has a non-array reference_chains");
    for (const json& r : j["reference_chains"]) {
      if (!r.is_object() || !r.contains("batch_field") || !r["batch_field"].is_string()) {
        return corrupt("has a reference chain without batch_field");
      }
      const std::string field = r["batch_field"].get<std::string>();
      const std::string what = "the reference chain of batch field `" + field + "`";
      if (!r.contains("steps") || !r["steps"].is_array() || r["steps"].empty() ||
          !r.contains("input_type") || !r.contains("output_type")) {
        return corrupt("has " + what + " without steps, input_type or output_type");
      }
      FusedChain chain;
      chain.symbol = "reference:" + field;
      auto input = pf::TypeFromJson(r["input_type"]);
      if (!input) return context(input.error(), what);
      auto output_type = pf::TypeFromJson(r["output_type"]);
      if (!output_type) return context(output_type.error(), what);
      chain.input = *input;
      chain.output = *output_type;
      const int c = chain.input.channel_axis();
      if (chain.input.dtype != DType::kUInt8 || chain.input.layout != Layout::kHWC || c < 0 ||
          (chain.input.dims[c] != 1 && chain.input.dims[c] != 3) || !chain.output.is_static()) {
        return corrupt("has " + what +
                       " whose input is not a decoded uint8 HWC image with 1 or 3 channels, or "
                       "whose output type is not static");
      }
      SLUICE_RETURN_IF_ERROR(read_steps(r["steps"], what, chain.steps));
      plan.reference_chains_.push_back(std::move(chain));
      plan.reference_fields_.push_back(field);
      plan.reference_reasons_.push_back(
          r.value("reason", json()).is_string() ? r["reason"].get<std::string>() : "");
    }
  }

  // The decode step: the decode-class graph node whose output the first chain
  // reads (the loader checks that every chain reads the same colour).
  if (!plan.chains_.empty() || !plan.reference_chains_.empty()) {
    const json& first = plan.chains_.empty() ? j["reference_chains"][0] : j["fusion_groups"][0];
    const json input = first.value("input", json());
    const json* decode = nullptr;
    if (j.contains("graph") && j["graph"].is_object() &&
        j["graph"].value("nodes", json()).is_array()) {
      for (const json& n : j["graph"]["nodes"]) {
        if (!n.is_object() || n.value("class", json()) != "decode" || !n.contains("outputs")) {
          continue;
        }
        for (const json& o : n["outputs"]) {
          if (o.is_object() && input.is_string() && o.value("name", json()) == input) decode = &n;
        }
      }
    }
    if (decode == nullptr || !decode->value("op", json()).is_string()) {
      return corrupt("has no decode node (graph.nodes) feeding its fusion groups");
    }
    plan.decode_op_ = (*decode)["op"].get<std::string>();
    const OpDef* decode_op = FindOp(plan.decode_op_);
    if (decode_op == nullptr || decode_op->op_class != OpClass::kDecode) {
      return MakeError(ErrorCode::kVersionMismatch,
                       where + " decodes with op `" + plan.decode_op_ +
                           "`, which this Sluice does not know",
                       kRecompile);
    }
    auto decode_params =
        pf::ParamsFromJson(decode_op->params, decode->value("params", json::object()));
    if (!decode_params) return context(decode_params.error(), "decode " + plan.decode_op_);
    for (auto& [name, value] : *decode_params) {
      if (!std::holds_alternative<std::string>(value.value)) continue;
      auto bound = BindVariables(value.AsString(), vars, plan.decode_op_ + "." + name);
      if (!bound) {
        Error e = bound.error();
        e.message = where + ": " + e.message;
        return std::unexpected(std::move(e));
      }
      value.value = *bound;
    }
    plan.decode_params_ = std::move(*decode_params);
  }

  if (j.contains("placement") && j["placement"].is_object() &&
      j["placement"].value("device", json()).is_string()) {
    plan.placement_device_ = j["placement"]["device"].get<std::string>();
  }

  // Knobs written by `sluice tune` (optional; absent in a freshly compiled plan).
  if (j.contains("tuned") && j["tuned"].is_object()) {
    const json& t = j["tuned"];
    auto knob = [&](const char* name) {
      return t.contains(name) && t[name].is_number_integer() ? t[name].get<int>() : -1;
    };
    plan.tuned_.threads = knob("threads");
    plan.tuned_.in_flight = knob("in_flight");
    plan.tuned_.prefetch = knob("prefetch");
    plan.tuned_.cpu_budget = knob("cpu_budget");
    if (t.contains("images_per_second") && t["images_per_second"].is_number()) {
      plan.tuned_.images_per_second = t["images_per_second"].get<double>();
    }
  }

  // kernels.so: present, unchanged, loadable, with a target this CPU runs.
  const json& k = j["kernels"];
  if (!k.contains("hash") || !k["hash"].is_string() || !k.contains("cpu_targets") ||
      !k["cpu_targets"].is_array()) {
    return corrupt("has no kernels.hash or kernels.cpu_targets");
  }
  for (const json& t : k["cpu_targets"]) {
    if (t.is_string()) plan.cpu_targets_.push_back(t.get<std::string>());
  }
  if (k.contains("cuda_target") && k["cuda_target"].is_string()) {
    plan.cuda_target_ = k["cuda_target"].get<std::string>();
  }
  const std::string so = (dir / pf::kKernelsFile).string();
  if (!fs::exists(so, ec)) {
    return MakeError(ErrorCode::kNotFound, where + " has no kernels.so (deleted or not copied?)",
                     std::string("copy the whole plan directory, or ") + kRecompile);
  }
  auto hash = pf::HashFile(so);
  if (!hash) return context(hash.error(), "kernels.so");
  const std::string expected = k["hash"].get<std::string>();
  if (*hash != expected) {
    return MakeError(ErrorCode::kCorruptData,
                     where + ": kernels.so does not match plan.json (hash " + *hash +
                         ", expected " + expected + "): it was changed or truncated after "
                         "compilation",
                     kRecompile);
  }
  if (!plan.chains_.empty()) {
    // The multitarget dispatcher falls back to its baseline without checking.
    if (Status cpu = runtime::CheckCpuSupports(plan.cpu_targets_); !cpu) {
      Error e = cpu.error();
      e.message = where + ": " + e.message;
      return std::unexpected(std::move(e));
    }
  }
  auto library = runtime::KernelLibrary::Open(so);
  if (!library) return context(library.error(), "kernels.so");
  plan.kernels_ = std::make_shared<const runtime::KernelLibrary>(std::move(*library));
  for (const FusedChain& chain : plan.chains_) {
    auto kernel = plan.kernels_->CpuKernel(chain);
    if (!kernel) {
      Error e = kernel.error();
      e.message = where + ": kernel `" + chain.symbol + "`: " + e.message;
      if (e.hint.empty()) e.hint = kRecompile;
      return std::unexpected(std::move(e));
    }
    plan.cpu_kernels_.push_back(std::make_shared<const runtime::Kernel>(std::move(*kernel)));
  }
  // CPU parts of split groups: kernels bound to the staging type.
  plan.cpu_part_kernels_.resize(plan.chains_.size());
  for (size_t i = 0; i < plan.chains_.size(); ++i) {
    const std::optional<GpuStage>& st = plan.gpu_stages_[i];
    if (!st) continue;
    FusedChain part = plan.chains_[i];
    part.symbol = st->cpu_part_symbol;
    part.output = st->staging;
    part.steps.resize(static_cast<size_t>(st->gpu_from));
    part.gpu_from = -1;
    auto kernel = plan.kernels_->CpuKernel(part);
    if (!kernel) {
      Error e = kernel.error();
      e.message = where + ": kernel `" + part.symbol + "`: " + e.message;
      e.code = ErrorCode::kCorruptData;
      if (e.hint.empty()) e.hint = kRecompile;
      return std::unexpected(std::move(e));
    }
    plan.cpu_part_kernels_[i] = std::make_shared<const runtime::Kernel>(std::move(*kernel));
  }
  return plan;
}

}  // namespace sluice
