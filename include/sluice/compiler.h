// The compiler's one entry point: spec -> checked, optimized graph -> plan.
//
//   sluice::CompileOptions options;
//   options.spec_path = "train.yaml";
//   options.profile_path = "hw.yaml";            // optional
//   auto compilation = sluice::Compile(options);
//   if (!compilation) { /* an error that is not about the spec: see below */ }
//   if (compilation->has_errors()) std::cerr << compilation->diagnostics();
//   else compilation->WritePlan("train.plan");   // plan.json, kernels.so, report.txt
//
// Compile runs the front end (parse, validate against the op registry), builds
// the IR and runs the pass pipeline (`sluice passes` lists it) up to
// `stop_after`. Problems in the spec are not errors of Compile: they are the
// Compilation's diagnostics (file:line:col, the field, a fix), and a
// Compilation with errors has no IR and writes no plan. Compile's own errors:
//   kInvalidArgument  both or neither of spec_path / spec_text; an unknown
//                     stop_after pass (the hint lists the passes)
//   the hardware profile's load error (LoadHardwareProfile)
//   kInternal         the IR verifier failed after a pass (a compiler bug)
//
// The CLI (`sluice compile`), the Python module (`sluice.compile_spec`), the
// profiler's probe plans and the tests all compile through this function.
//
// Thread safety: Compile and WritePlan run the code generator, which is
// single-threaded (one compilation at a time per process); a Compilation's
// const accessors may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/result.h"

namespace sluice {

// What the code generator builds (defaults: the CPU feature levels the
// compiler ships for runtime dispatch, and CUDA kernels when the toolchain can).
struct CodegenSettings {
  // Halide target strings, e.g. "x86-64-linux-avx-avx2-f16c-fma-sse41"; empty:
  // the default list.
  std::vector<std::string> cpu_targets;
  bool cuda = true;  // build CUDA kernels for groups placed on the GPU
};

struct CompileOptions {
  // The spec: a file path, or YAML text named `spec_name` in diagnostics
  // ("<string>" when empty). Exactly one of spec_path / spec_text.
  std::string spec_path;
  std::optional<std::string> spec_text;
  std::string spec_name;
  // A hardware profile file (`sluice profile -o hw.yaml`) for the placement
  // pass's cost model; empty: none (everything on the CPU under device auto).
  std::string profile_path;
  // Cores the loader may take, overriding output.cpu_budget; -1: none.
  int cpu_budget = -1;
  // Run the passes up to and including this one (`--emit=ir-after=PASS`);
  // empty: all. A Compilation stopped early cannot write a plan.
  std::string stop_after;
  // Stop after the front end: no IR, no passes (`--emit=spec`).
  bool parse_only = false;
  CodegenSettings codegen;
};

class Compilation {
 public:
  Compilation(Compilation&&) noexcept;
  Compilation& operator=(Compilation&&) noexcept;
  ~Compilation();

  // True when the spec has errors (then only diagnostics() says anything).
  bool has_errors() const;
  // Every diagnostic, rendered: "file:line:col: error: ...\n  hint: ...\n",
  // sorted by position; "" when there are none.
  std::string diagnostics() const;
  // The diagnostics as one error (kInvalidSpec; message = diagnostics(), mark =
  // the first diagnostic's position); requires has_errors().
  Error diagnostics_error() const;
  // The pipeline's name (the spec's `name`).
  const std::string& name() const;
  // The IR as `--emit=ir` prints it (after `stop_after`, or every pass);
  // "" when has_errors() or parse_only.
  std::string ir_text() const;
  // "image: float16[256,3,224,224] CHW, label: int64[256]": the batch fields.
  std::string batch_summary() const;
  int node_count() const;
  int fusion_group_count() const;
  // The pass the pipeline stopped after ("" when every pass ran).
  const std::string& stopped_after() const;

  // Writes the plan directory `out_dir` (created if missing; plan.json,
  // kernels.so, report.txt): runs the code generator with options.codegen.
  // Errors: kInvalidArgument (has_errors(), stopped early or parse_only;
  // `out_dir` is not a directory), kIo, the code generator's.
  Status WritePlan(const std::string& out_dir);
  // report.txt's text of the last WritePlan ("" before one succeeded).
  const std::string& report() const;

  struct Impl;
  // Internal (compiler/driver/compilation_internal.h).
  explicit Compilation(std::unique_ptr<Impl> impl);
  Impl& impl() { return *impl_; }
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

Result<Compilation> Compile(const CompileOptions& options);

}  // namespace sluice
