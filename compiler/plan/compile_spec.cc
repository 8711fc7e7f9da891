// Spec text to a compiled plan (compiler/plan/compile_spec.h).
#include "compiler/plan/compile_spec.h"

#include "compiler/passes/pass.h"
#include "compiler/plan/plan_writer.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"

namespace sluice {

Result<Graph> CheckedGraph(const std::string& spec_text, const std::string& source_name) {
  Diagnostics diags;
  Spec spec = ParseSpecText(spec_text, source_name, diags);
  if (diags.has_errors()) return MakeError(ErrorCode::kInvalidArgument, diags.Render());
  Graph graph = BuildGraph(spec);
  Status passes = RunPasses(graph, diags);
  if (diags.has_errors()) return MakeError(ErrorCode::kInvalidArgument, diags.Render());
  SLUICE_RETURN_IF_ERROR(passes);
  return graph;
}

Status CompileSpecText(const std::string& spec_text, const std::string& source_name,
                       const std::string& out_dir, const CodegenOptions& options) {
  auto graph = CheckedGraph(spec_text, source_name);
  if (!graph) return std::unexpected(graph.error());
  return CompilePlan(*graph, spec_text, out_dir, options);
}

}  // namespace sluice
