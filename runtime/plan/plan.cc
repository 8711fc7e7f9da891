// Plan::Load: reading and checking a compiled plan (see include/sluice/plan.h).
#include "sluice/plan.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ops/fusion/plan_format.h"
#include "ops/registry.h"
#include "runtime/kernels/kernel_library.h"
#include "runtime/plan/plan_internal.h"

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
                       "bind it when loading: --var " + name +
                           "=VALUE (C++: Plan::Load(path, {{\"" + name + "\", ...}}))");
    }
    out += text.substr(pos, start - pos) + it->second;
    pos = end + 1;
  }
  return out + text.substr(pos);
}

namespace {

// Parameters in a plan document, read against this Sluice's registry; a
// parameter it does not know is a version mismatch.
class Resolver {
 public:
  explicit Resolver(const std::string& where) : where_(where) {}

  Error Context(Error e, const std::string& what) const {
    e.message = where_ + ": " + what + ": " + e.message;
    if (e.code == ErrorCode::kInvalidArgument) e.code = ErrorCode::kVersionMismatch;
    if (e.hint.empty()) e.hint = kRecompile;
    return e;
  }
  Error Corrupt(const std::string& why) const {
    return Error{ErrorCode::kCorruptData, where_ + ": plan.json " + why, kRecompile, {}};
  }

  Result<ParamList> Params(const std::vector<ParamDef>& defs, const json& j,
                           const std::string& what) const {
    auto params = pf::ParamsFromJson(defs, j);
    if (!params) return std::unexpected(Context(params.error(), what));
    return std::move(*params);
  }

  // String params with their ${VARS} bound (`section`: "source", ...).
  Status Bind(ParamList& params, const PlanVars& vars, const std::string& section) const {
    for (auto& [name, value] : params) {
      if (!std::holds_alternative<std::string>(value.value)) continue;
      auto bound = BindVariables(value.AsString(), vars, section + "." + name);
      if (!bound) {
        Error e = bound.error();
        e.message = where_ + ": " + e.message;
        return std::unexpected(std::move(e));
      }
      value.value = *bound;
    }
    return Ok();
  }

  Result<const OpDef*> Op(const std::string& name) const {
    const OpDef* op = FindOp(name);
    if (op == nullptr) {
      return MakeError(ErrorCode::kVersionMismatch,
                       where_ + " uses op `" + name + "`, which this Sluice does not know",
                       kRecompile);
    }
    return op;
  }

  Status Steps(const std::vector<PlanStepDoc>& steps, const std::string& what,
               std::vector<ChainStep>& out) const {
    for (const PlanStepDoc& s : steps) {
      auto op = Op(s.op);
      if (!op) return std::unexpected(op.error());
      auto params = Params((*op)->params, s.params, what + ": op " + s.op);
      if (!params) return std::unexpected(params.error());
      out.push_back(ChainStep{*op, std::move(*params), s.op_id});
    }
    return Ok();
  }

 private:
  std::string where_;
};

// Fusion groups -> FusedChains and their GPU stages.
Status ReadChains(const Resolver& r, const PlanDocument& doc, Plan::Impl& plan) {
  for (const PlanGroupDoc& g : doc.fusion_groups) {
    FusedChain chain;
    chain.symbol = g.symbol;
    chain.input = g.input_type;
    chain.output = g.output_type;
    SLUICE_RETURN_IF_ERROR(r.Steps(g.steps, "fusion group " + chain.symbol, chain.steps));
    // The GPU split (absent in plans from before placement; null fields = none).
    std::optional<GpuStage> stage;
    if (g.gpu_from >= 0) {
      chain.gpu_from = g.gpu_from;
      if (chain.gpu_from >= static_cast<int>(chain.steps.size())) {
        return std::unexpected(
            r.Corrupt("fusion group " + chain.symbol + " has gpu_from past its steps"));
      }
      if (!g.cpu_part_symbol.empty() && !g.gpu_batch_symbol.empty() && g.staging_type) {
        GpuStage st{chain.gpu_from, g.cpu_part_symbol, g.gpu_batch_symbol, *g.staging_type};
        if (!st.staging.is_static() || st.staging.dtype != DType::kUInt8 ||
            st.staging.dims.size() != 3 || st.staging.layout != Layout::kCHW) {
          Error e = r.Corrupt("fusion group " + chain.symbol +
                              " has an invalid GPU stage (its staging_type is " +
                              st.staging.ToString() + ", not a static uint8 CHW image)");
          if (st.staging.layout == Layout::kHWC) {
            e.hint = "plans before planar GPU staging wrote HWC; recompile the plan";
          }
          return std::unexpected(std::move(e));
        }
        stage = std::move(st);
      }
    }
    plan.chains.push_back(std::move(chain));
    plan.gpu_stages.push_back(std::move(stage));
    plan.chain_fields.push_back(g.batch_field);
  }
  for (const PlanReferenceDoc& ref : doc.reference_chains) {
    const std::string what = "the reference chain of batch field `" + ref.batch_field + "`";
    FusedChain chain;
    chain.symbol = "reference:" + ref.batch_field;
    chain.input = ref.input_type;
    chain.output = ref.output_type;
    const int c = chain.input.channel_axis();
    if (chain.input.dtype != DType::kUInt8 || chain.input.layout != Layout::kHWC || c < 0 ||
        (chain.input.dims[c] != 1 && chain.input.dims[c] != 3) || !chain.output.is_static()) {
      return std::unexpected(
          r.Corrupt("has " + what +
                    " whose input is not a decoded uint8 HWC image with 1 or 3 channels, or "
                    "whose output type is not static"));
    }
    SLUICE_RETURN_IF_ERROR(r.Steps(ref.steps, what, chain.steps));
    plan.reference_chains.push_back(std::move(chain));
    plan.reference_fields.push_back(ref.batch_field);
    plan.reference_reasons.push_back(ref.reason);
  }
  return Ok();
}

// kernels.so: present and unchanged (plan.json's hash); then, when `load`,
// with a target this CPU runs, dlopened (running its initialisers: machine
// code from the plan) and each chain's kernels looked up.
Status OpenKernels(const Resolver& r, const std::string& where, const fs::path& dir,
                   Plan::Impl& plan, bool load) {
  std::error_code ec;
  const std::string so = (dir / pf::kKernelsFile).string();
  if (!fs::exists(so, ec)) {
    return MakeError(ErrorCode::kNotFound, where + " has no kernels.so (deleted or not copied?)",
                     std::string("copy the whole plan directory, or ") + kRecompile);
  }
  auto hash = pf::HashFile(so);
  if (!hash) return std::unexpected(r.Context(hash.error(), "kernels.so"));
  const std::string& expected = plan.doc.kernels.hash;
  if (*hash != expected) {
    return MakeError(ErrorCode::kCorruptData,
                     where + ": kernels.so does not match plan.json (hash " + *hash +
                         ", expected " + expected +
                         "): it was changed or truncated after "
                         "compilation",
                     kRecompile);
  }
  if (!load) return Ok();
  if (!plan.chains.empty()) {
    // The multitarget dispatcher falls back to its baseline without checking.
    if (Status cpu = runtime::CheckCpuSupports(plan.doc.kernels.cpu_targets); !cpu) {
      Error e = cpu.error();
      e.message = where + ": " + e.message;
      return std::unexpected(std::move(e));
    }
  }
  auto library = runtime::KernelLibrary::Open(so);
  if (!library) return std::unexpected(r.Context(library.error(), "kernels.so"));
  plan.kernels = std::make_shared<const runtime::KernelLibrary>(std::move(*library));
  auto kernel_error = [&](Error e, const std::string& symbol) {
    e.message = where + ": kernel `" + symbol + "`: " + e.message;
    if (e.hint.empty()) e.hint = kRecompile;
    return std::unexpected(std::move(e));
  };
  for (const FusedChain& chain : plan.chains) {
    auto kernel = plan.kernels->CpuKernel(chain);
    if (!kernel) return kernel_error(kernel.error(), chain.symbol);
    plan.cpu_kernels.push_back(std::make_shared<const runtime::Kernel>(std::move(*kernel)));
  }
  // CPU parts of split groups: kernels bound to the staging type.
  plan.cpu_part_kernels.resize(plan.chains.size());
  for (size_t i = 0; i < plan.chains.size(); ++i) {
    const std::optional<GpuStage>& st = plan.gpu_stages[i];
    if (!st) continue;
    FusedChain part = plan.chains[i];
    part.symbol = st->cpu_part_symbol;
    part.output = st->staging;
    part.steps.resize(static_cast<size_t>(st->gpu_from));
    part.gpu_from = -1;
    auto kernel = plan.kernels->CpuKernel(part);
    if (!kernel) {
      Error e = kernel.error();
      e.code = ErrorCode::kCorruptData;
      return kernel_error(std::move(e), part.symbol);
    }
    plan.cpu_part_kernels[i] = std::make_shared<const runtime::Kernel>(std::move(*kernel));
  }
  return Ok();
}

}  // namespace

namespace {

// plan.json of the plan directory `path`, parsed, with its format and
// compiler versions checked (a plan from another format may not have the
// other keys). `where` names the plan in messages.
Result<json> ReadPlanJson(const std::string& path, const std::string& where) {
  auto corrupt = [&](const std::string& why) {
    return MakeError(ErrorCode::kCorruptData, where + ": plan.json " + why, kRecompile);
  };
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return MakeError(ErrorCode::kNotFound, where + " is not a directory",
                     "a plan is the directory written by sluice compile SPEC -o PLAN");
  }
  std::ifstream in(fs::path(path) / pf::kPlanFile, std::ios::binary);
  if (!in) {
    return MakeError(ErrorCode::kNotFound, where + " has no plan.json",
                     "a plan is the directory written by sluice compile SPEC -o PLAN");
  }
  std::ostringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("is not valid JSON");
  if (!j.contains("format_version") || !j["format_version"].is_number_integer()) {
    return corrupt("has no integer format_version");
  }
  const int64_t format = j["format_version"].get<int64_t>();  // not narrowed: 2 + 2^32 is not 2
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
  const std::string compiler_version = j["compiler_version"].get<std::string>();
  if (MajorMinor(compiler_version) != MajorMinor(SLUICE_VERSION)) {
    return MakeError(ErrorCode::kVersionMismatch,
                     where + " was compiled by sluice " + compiler_version + "; this runtime is " +
                         SLUICE_VERSION + " (plans are compatible within a major.minor version)",
                     std::string(kRecompile) + " with this version of sluice");
  }
  return j;
}

// The source, sampling, output and batch sections, resolved against the
// registry; ${VARS} in the source bound from `vars` unless it is null.
Status ResolveSections(const Resolver& r, const std::string& where, const PlanVars* vars,
                       Plan::Impl& plan) {
  const PlanDocument& d = plan.doc;
  const OpDef* source_op = FindOp(d.source_format);
  if (source_op == nullptr || source_op->op_class != OpClass::kSource) {
    return MakeError(
        ErrorCode::kVersionMismatch,
        where + " reads source format `" + d.source_format + "`, which this Sluice does not know",
        kRecompile);
  }
  auto source_params = r.Params(source_op->params, d.source_params, "source");
  if (!source_params) return std::unexpected(source_params.error());
  if (vars != nullptr) SLUICE_RETURN_IF_ERROR(r.Bind(*source_params, *vars, "source"));
  plan.source_params = std::move(*source_params);
  auto sampling = r.Params(SamplingParams(), d.sampling, "sampling");
  if (!sampling) return std::unexpected(sampling.error());
  plan.sampling = std::move(*sampling);
  auto output = r.Params(OutputParams(), d.output, "output");
  if (!output) return std::unexpected(output.error());
  plan.output = std::move(*output);
  const OpDef* batch_op = FindOp("batch");
  if (batch_op == nullptr) return MakeError(ErrorCode::kInternal, "the registry has no `batch` op");
  auto batch = r.Params(batch_op->params, d.batch, "batch");
  if (!batch) return std::unexpected(batch.error());
  plan.batch = std::move(*batch);
  return Ok();
}

// The decode step (absent in plans from before decode_pushdown) and the
// tuned knobs (absent until `sluice tune`).
Status ResolveDecodeAndTuned(const Resolver& r, const PlanVars* vars, Plan::Impl& plan) {
  const PlanDocument& d = plan.doc;
  if (d.decode) {
    auto op = r.Op(d.decode->op);
    if (!op) return std::unexpected(op.error());
    auto params = r.Params((*op)->params, d.decode->params, "decode " + d.decode->op);
    if (!params) return std::unexpected(params.error());
    if (vars != nullptr) SLUICE_RETURN_IF_ERROR(r.Bind(*params, *vars, "decode"));
    plan.decode_op = d.decode->op;
    plan.decode_params = std::move(*params);
  }
  if (d.tuned) {
    plan.tuned = TunedKnobs{d.tuned->threads, d.tuned->in_flight, d.tuned->prefetch,
                            d.tuned->cpu_budget, d.tuned->images_per_second};
    auto info_int = [&](const char* key) {
      const auto it = d.tuned->info.find(key);
      return it != d.tuned->info.end() && it->is_number_integer() ? it->get<int64_t>()
                                                                  : int64_t{-1};
    };
    plan.tuned.memory_budget = info_int("memory_budget");
    plan.tuned.batch_bytes = info_int("batch_bytes");
  }
  return Ok();
}

// Plan::Load and Plan::Verify: reads and checks the plan at `path`; binds
// ${VARS} from `vars` unless it is null; loads kernels.so when `load_kernels`
// (else only checks its hash).
Result<std::shared_ptr<Plan::Impl>> ReadPlan(const std::string& path, const PlanVars* vars,
                                             bool load_kernels) {
  const std::string where = "plan `" + path + "`";
  auto j = ReadPlanJson(path, where);
  if (!j) return std::unexpected(j.error());
  auto doc = PlanDocument::FromJson(*j, where);
  if (!doc) return std::unexpected(doc.error());
  auto impl = std::make_shared<Plan::Impl>();
  Plan::Impl& plan = *impl;
  plan.path = path;
  plan.doc = std::move(*doc);
  const Resolver r(where);
  SLUICE_RETURN_IF_ERROR(ResolveSections(r, where, vars, plan));
  SLUICE_RETURN_IF_ERROR(ReadChains(r, plan.doc, plan));
  SLUICE_RETURN_IF_ERROR(ResolveDecodeAndTuned(r, vars, plan));
  SLUICE_RETURN_IF_ERROR(OpenKernels(r, where, fs::path(path), plan, load_kernels));
  return impl;
}

}  // namespace

Result<Plan> Plan::Load(const std::string& path, const PlanVars& vars) {
  auto impl = ReadPlan(path, &vars, /*load_kernels=*/true);
  if (!impl) return std::unexpected(impl.error());
  Plan loaded;
  loaded.impl_ = std::move(*impl);
  return loaded;
}

Result<PlanCheck> Plan::Verify(const std::string& path) {
  auto impl = ReadPlan(path, nullptr, /*load_kernels=*/false);
  if (!impl) return std::unexpected(impl.error());
  const PlanDocument& d = (*impl)->doc;
  // The loader refuses a batch buffer layout that is out of bounds or
  // overlapping (ResolveLoaderConfig); verify says so first.
  SLUICE_RETURN_IF_ERROR(CheckMemoryLayout(d.memory, d.batch, "plan `" + path + "`"));
  return PlanCheck{.name = d.name,
                   .format_version = plan_format::kFormatVersion,
                   .compiler_version = d.compiler_version,
                   .spec_hash = d.spec_hash,
                   .kernels_hash = d.kernels.hash};
}

const std::string& Plan::path() const { return impl_->path; }
const std::string& Plan::name() const { return impl_->doc.name; }
const std::string& Plan::spec_hash() const { return impl_->doc.spec_hash; }
const std::string& Plan::compiler_version() const { return impl_->doc.compiler_version; }
const std::string& Plan::source_format() const { return impl_->doc.source_format; }
std::vector<std::string> Plan::batch_fields() const {
  std::vector<std::string> fields;
  if (const ParamValue* f = FindParam(impl_->batch, "fields");
      f != nullptr && std::holds_alternative<std::map<std::string, std::string>>(f->value)) {
    for (const auto& [field, tensor] : f->AsStringMap()) fields.push_back(field);
  }
  return fields;
}
int64_t Plan::batch_size() const {
  const ParamValue* size = FindParam(impl_->batch, "size");
  return size != nullptr && std::holds_alternative<int64_t>(size->value) ? size->AsInt() : 0;
}
const std::vector<std::string>& Plan::cpu_targets() const { return impl_->doc.kernels.cpu_targets; }
const std::string& Plan::cuda_target() const { return impl_->doc.kernels.cuda_target; }
const std::string& Plan::placement_device() const { return impl_->doc.placement_device; }
const TunedKnobs& Plan::tuned() const { return impl_->tuned; }
const ParamList& Plan::source_params() const { return impl_->source_params; }
const ParamList& Plan::sampling() const { return impl_->sampling; }
const ParamList& Plan::batch() const { return impl_->batch; }
const ParamList& Plan::output() const { return impl_->output; }
const std::vector<FusedChain>& Plan::chains() const { return impl_->chains; }
const std::vector<std::string>& Plan::chain_fields() const { return impl_->chain_fields; }
const std::vector<FusedChain>& Plan::reference_chains() const { return impl_->reference_chains; }
const std::vector<std::string>& Plan::reference_fields() const { return impl_->reference_fields; }
const std::vector<std::string>& Plan::reference_reasons() const { return impl_->reference_reasons; }
const std::vector<std::optional<GpuStage>>& Plan::gpu_stages() const { return impl_->gpu_stages; }
const std::string& Plan::decode_op() const { return impl_->decode_op; }
const ParamList& Plan::decode_params() const { return impl_->decode_params; }
bool Plan::decode_roi_allowed() const { return impl_->doc.decode && impl_->doc.decode->roi; }
bool Plan::decode_dct_scaling_allowed() const {
  return impl_->doc.decode && impl_->doc.decode->dct_scaling;
}
const PlanMemoryDoc* Plan::memory() const {
  return impl_->doc.memory ? &*impl_->doc.memory : nullptr;
}
const PlanDocument& Plan::document() const { return impl_->doc; }
const runtime::KernelLibrary& Plan::kernels() const { return *impl_->kernels; }
const runtime::Kernel& Plan::cpu_kernel(size_t i) const { return *impl_->cpu_kernels[i]; }
const runtime::Kernel* Plan::cpu_part_kernel(size_t i) const {
  return i < impl_->cpu_part_kernels.size() ? impl_->cpu_part_kernels[i].get() : nullptr;
}

}  // namespace sluice
