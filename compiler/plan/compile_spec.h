// Spec text to a compiled plan in one call: ParseSpecText, BuildGraph,
// RunPasses, then CompilePlan. For callers that start from a spec string and
// need no hardware profile (sluice profile's probes, tests); the CLI and the
// Python module run the same steps themselves because they add a profile and
// report diagnostics their own way.
#ifndef SLUICE_COMPILER_PLAN_COMPILE_SPEC_H_
#define SLUICE_COMPILER_PLAN_COMPILE_SPEC_H_

#include <string>

#include "compiler/codegen/codegen.h"
#include "compiler/ir/ir.h"
#include "sluice/result.h"

namespace sluice {

// The graph of `spec_text` after every pass. `source_name` names the text in
// diagnostics (file:line:col). Errors: kInvalidArgument with the rendered
// diagnostics, or the error of a pass.
Result<Graph> CheckedGraph(const std::string& spec_text, const std::string& source_name);

// CheckedGraph, then CompilePlan into `out_dir` (plan.json, kernels.so,
// report.txt).
Status CompileSpecText(const std::string& spec_text, const std::string& source_name,
                       const std::string& out_dir, const CodegenOptions& options);

}  // namespace sluice

#endif  // SLUICE_COMPILER_PLAN_COMPILE_SPEC_H_
