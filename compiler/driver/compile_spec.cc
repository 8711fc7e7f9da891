// Shorthands over the compile driver (compiler/driver/compile_spec.h).
#include "compiler/driver/compile_spec.h"

#include "compiler/driver/compilation_internal.h"

namespace sluice {
namespace {

Result<Compilation> CompileText(const std::string& spec_text, const std::string& source_name,
                                const CodegenOptions& codegen) {
  CompileOptions options;
  options.spec_text = spec_text;
  options.spec_name = source_name;
  options.codegen.cpu_targets = codegen.cpu_targets;
  options.codegen.cuda = codegen.cuda;
  auto compilation = Compile(options);
  if (!compilation) return std::unexpected(compilation.error());
  if (compilation->has_errors()) return std::unexpected(compilation->diagnostics_error());
  return compilation;
}

}  // namespace

Result<Graph> CheckedGraph(const std::string& spec_text, const std::string& source_name) {
  auto compilation = CompileText(spec_text, source_name, CodegenOptions{});
  if (!compilation) return std::unexpected(compilation.error());
  return std::move(compilation->impl().graph);
}

Status CompileSpecText(const std::string& spec_text, const std::string& source_name,
                       const std::string& out_dir, const CodegenOptions& options) {
  auto compilation = CompileText(spec_text, source_name, options);
  if (!compilation) return std::unexpected(compilation.error());
  return compilation->WritePlan(out_dir);
}

}  // namespace sluice
