// sluice::Compile, the one compile driver (include/sluice/compiler.h):
// front end -> IR -> pass pipeline, then on request code generation
// (compiler/codegen) and the plan artifact (compiler/plan/plan_writer.h). The
// driver is the only part of the compiler that sees every layer.
#include <filesystem>
#include <optional>
#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/cost/cost_model.h"
#include "compiler/driver/compilation_internal.h"
#include "compiler/driver/plan_output.h"
#include "compiler/passes/fused_chains.h"
#include "compiler/passes/pass.h"
#include "compiler/plan/plan_writer.h"
#include "ops/fusion/plan_format.h"

namespace sluice {

CodegenOptions ToCodegenOptions(const CodegenSettings& settings) {
  CodegenOptions options;
  if (!settings.cpu_targets.empty()) options.cpu_targets = settings.cpu_targets;
  options.cuda = settings.cuda;
  return options;
}

KernelRecord ToKernelRecord(const KernelArtifact& artifact) {
  KernelRecord record;
  BuiltKernels& b = record.artifact;
  b.cpu_targets = artifact.cpu_targets;
  b.cuda_target = artifact.cuda_target;
  b.cuda_note = artifact.cuda_note;
  for (const KernelArtifact::Kernel& k : artifact.kernels) {
    b.kernels.push_back({k.symbol, k.cuda_symbol, k.cpu_part_symbol, k.gpu_batch_symbol});
  }
  b.arg_names = artifact.arg_names;
  return record;
}

Compilation::Compilation(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Compilation::Compilation(Compilation&&) noexcept = default;
Compilation& Compilation::operator=(Compilation&&) noexcept = default;
Compilation::~Compilation() = default;

bool Compilation::has_errors() const { return impl_->diags.has_errors(); }

std::string Compilation::diagnostics() const {
  return impl_->diags.errors().empty() ? std::string() : impl_->diags.Render();
}

Error Compilation::diagnostics_error() const {
  const Diagnostics& diags = impl_->diags;
  Error e = diags.ToError();
  const Error* first = nullptr;
  for (const Error& d : diags.errors()) {
    if (!d.mark.valid()) continue;
    if (first == nullptr ||
        std::pair(d.mark.line, d.mark.column) < std::pair(first->mark.line, first->mark.column)) {
      first = &d;
    }
  }
  if (first != nullptr && e.message.starts_with(first->mark.ToString() + ":")) e.mark = first->mark;
  return e;
}

const std::string& Compilation::name() const {
  return impl_->graph_built ? impl_->graph.name : impl_->spec.name;
}

std::string Compilation::ir_text() const {
  return impl_->graph_built ? PrintGraph(impl_->graph) : std::string();
}

std::string Compilation::batch_summary() const {
  const Graph& graph = impl_->graph;
  if (!impl_->graph_built || graph.nodes.empty()) return "";
  const Node& batch = graph.nodes.back();
  std::string out;
  for (ValueId v : batch.outputs) {
    const Value& value = graph.value(v);
    std::string name = value.name;
    if (name.starts_with(kBatchValuePrefix))
      name = name.substr(std::string(kBatchValuePrefix).size());
    if (!out.empty()) out += ", ";
    out += name + ": " + (value.type ? value.type->ToString() : std::string("?type"));
  }
  return out;
}

int Compilation::node_count() const { return static_cast<int>(impl_->graph.nodes.size()); }

int Compilation::fusion_group_count() const { return CountFusionGroups(impl_->graph); }

const std::string& Compilation::stopped_after() const { return impl_->stopped_after; }

const std::string& Compilation::report() const { return impl_->report; }

Status Compilation::WritePlan(const std::string& out_dir) {
  Impl& c = *impl_;
  if (c.diags.has_errors() || !c.graph_built) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot write a plan: the spec did not compile (or only the front end ran)");
  }
  if (!c.stopped_after.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "cannot write a plan after stopping at pass " + c.stopped_after,
                     "a plan needs every pass");
  }
  // Built whole in a staging directory beside out_dir, then swapped in
  // (plan_output.h): concurrent compiles into one out_dir never share a file,
  // and a failed compile leaves out_dir as it was.
  auto staged = StagedPlanDir::Create(out_dir);
  if (!staged) return std::unexpected(staged.error());
  const std::string& dir = staged->path();
  std::vector<FusedChain> chains = BuildFusedChains(c.graph);
  auto artifact = CompileKernels(chains, dir, ToCodegenOptions(c.options.codegen));
  if (!artifact) return std::unexpected(artifact.error());
  KernelRecord record = ToKernelRecord(*artifact);
  namespace fs = std::filesystem;
  const std::string so = (fs::path(dir) / plan_format::kKernelsFile).string();
  auto hash = plan_format::HashFile(so);
  if (!hash) {
    return MakeError(ErrorCode::kInternal, "the code generator did not leave " +
                                               std::string(plan_format::kKernelsFile) + " in `" +
                                               dir + "`: " + hash.error().message);
  }
  record.hash = *hash;
  std::error_code ec;
  record.bytes = static_cast<int64_t>(fs::file_size(so, ec));
  auto report =
      sluice::WritePlan(c.graph, c.spec_text, record, dir, c.profile ? &*c.profile : nullptr);
  if (!report) return std::unexpected(report.error());
  SLUICE_RETURN_IF_ERROR(staged->Commit());
  c.report = std::move(*report);
  return Ok();
}

Result<Compilation> Compile(const CompileOptions& options) {
  if (options.spec_path.empty() == !options.spec_text.has_value()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "CompileOptions needs exactly one of spec_path and spec_text");
  }
  if (!options.stop_after.empty() && FindPass(options.stop_after) == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument, "unknown pass `" + options.stop_after + "`",
                     "valid passes, in order: " + PassNames());
  }
  auto impl = std::make_unique<Compilation::Impl>();
  Compilation::Impl& c = *impl;
  c.options = options;
  if (options.spec_text) {
    c.spec_text = *options.spec_text;
    c.spec = ParseSpecText(c.spec_text, options.spec_name.empty() ? "<string>" : options.spec_name,
                           c.diags);
  } else {
    // Bounded read (kMaxSpecBytes): never the whole stream, which /dev/zero
    // or a FIFO would make endless.
    if (std::optional<std::string> text = ReadSpecFile(options.spec_path, c.diags)) {
      c.spec_text = std::move(*text);
      c.spec = ParseSpecText(c.spec_text, options.spec_path, c.diags);
    } else {
      c.spec.file = options.spec_path;
    }
  }
  if (c.diags.has_errors() || options.parse_only) return Compilation(std::move(impl));

  c.graph = BuildGraph(c.spec);
  c.graph_built = true;
  if (!options.profile_path.empty()) {
    auto profile = LoadHardwareProfile(options.profile_path);
    if (!profile) return std::unexpected(profile.error());
    c.profile = std::move(*profile);
  }
  PassContext context{c.diags, c.profile ? &*c.profile : nullptr, options.cpu_budget};
  if (c.profile) context.predict = CostModelPredictor(*c.profile);  // placement's predictions
  Status passes = RunPasses(c.graph, context, options.stop_after);
  if (c.diags.has_errors()) {  // the spec's errors first, as the user can fix them
    c.graph = Graph{};
    c.graph_built = false;
    return Compilation(std::move(impl));
  }
  SLUICE_RETURN_IF_ERROR(passes);
  c.stopped_after = options.stop_after;
  return Compilation(std::move(impl));
}

}  // namespace sluice
