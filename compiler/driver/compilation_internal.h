// The inside of a sluice::Compilation (include/sluice/compiler.h), for the
// compiler's own users that need more than the public accessors: the CLI
// (--emit=spec prints the parsed Spec) and tests (the graph after the passes).
#pragma once

#include <optional>
#include <string>

#include "common/hardware_profile.h"
#include "compiler/codegen/codegen.h"
#include "compiler/ir/ir.h"
#include "compiler/plan/plan_writer.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "sluice/compiler.h"

namespace sluice {

struct Compilation::Impl {
  CompileOptions options;
  Diagnostics diags;
  std::string spec_text;  // what the spec hash is computed from
  Spec spec;              // valid unless the spec file could not be read
  Graph graph;            // empty when has_errors() or options.parse_only
  bool graph_built = false;
  std::optional<HardwareProfile> profile;
  std::string stopped_after;
  std::string report;
};

// The code generator's options for `settings` (empty cpu_targets: the defaults).
CodegenOptions ToCodegenOptions(const CodegenSettings& settings);
// What the plan records about the code generator's artifact (hash and bytes
// left for the caller).
KernelRecord ToKernelRecord(const KernelArtifact& artifact);

}  // namespace sluice
