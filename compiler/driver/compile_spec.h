// Shorthands over the compile driver (sluice::Compile, include/sluice/compiler.h)
// for callers that start from a spec string: the profiler's probe plans and
// tests. Nothing here compiles by itself.
#ifndef SLUICE_COMPILER_DRIVER_COMPILE_SPEC_H_
#define SLUICE_COMPILER_DRIVER_COMPILE_SPEC_H_

#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/ir/ir.h"
#include "sluice/result.h"

namespace sluice {

// The graph of `spec_text` after every pass (Compile with spec_text and
// spec_name = `source_name`). Errors: kInvalidSpec with the rendered
// diagnostics, or Compile's.
Result<Graph> CheckedGraph(const std::string& spec_text, const std::string& source_name);

// Compile, then Compilation::WritePlan(out_dir) with options' CPU targets and
// CUDA switch.
Status CompileSpecText(const std::string& spec_text, const std::string& source_name,
                       const std::string& out_dir, const CodegenOptions& options);

}  // namespace sluice

#endif  // SLUICE_COMPILER_DRIVER_COMPILE_SPEC_H_
