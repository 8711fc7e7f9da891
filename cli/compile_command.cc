// `sluice compile SPEC [--emit=...] [-o PLAN] [--profile HW.yaml] [--cpu-budget N]`:
// the compile driver (sluice::Compile, include/sluice/compiler.h): front end,
// IR, passes (placement reads the hardware profile and the CPU budget), and
// with -o the plan artifact.
#include <charconv>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cli/cli.h"
#include "common/hardware_profile.h"
#include "common/progress.h"
#include "compiler/driver/compilation_internal.h"
#include "compiler/passes/pass.h"
#include "sluice/compiler.h"

namespace sluice::cli {
int Passes(const Args& args) {
  if (!args.empty()) return UsageError("`sluice passes` takes no arguments");
  for (const Pass& pass : PassPipeline()) std::cout << pass.name << "  " << pass.doc << "\n";
  return 0;
}

namespace {

// What `sluice compile` was asked to do.
struct CompileArgs {
  std::string spec_path, plan_out, profile_path;
  bool have_plan_out = false;
  int cpu_budget = -1;     // --cpu-budget; -1: the profile's
  bool emit_ir = false;    // --emit=ir or --emit=ir-after=PASS
  bool emit_spec = false;  // --emit=spec
  std::string stop_after;  // the PASS of --emit=ir-after=PASS
  bool help = false;       // --help: usage printed, nothing else to do
};

// Parses `--emit=...` into `out`; 0 or a usage error's exit code (printed).
int ParseEmit(const std::string& emit, CompileArgs& out) {
  if (emit == "ir") {
    out.emit_ir = true;
  } else if (emit.starts_with("ir-after=")) {
    out.emit_ir = true;
    out.stop_after = emit.substr(std::string("ir-after=").size());
    if (FindPass(out.stop_after) == nullptr) {
      return UsageError("unknown pass `" + out.stop_after +
                        "` in --emit=ir-after; passes, in order: " + PassNames());
    }
  } else if (emit == "spec") {
    out.emit_spec = true;
  } else if (!emit.empty()) {
    return UsageError("unknown --emit value `" + emit +
                      "`; use --emit=ir, --emit=ir-after=PASS or --emit=spec");
  }
  return 0;
}

// Parses `sluice compile`'s arguments into `out`; 0 or a usage error's exit
// code (printed).
int ParseCompileArgs(const Args& args, CompileArgs& out) {
  std::string emit, budget_text, error;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << UsageText();
      out.help = true;
      return 0;
    }
    if (TakeValue(args, i, "--emit", emit, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    if (TakeValue(args, i, "-o", out.plan_out, error) ||
        TakeValue(args, i, "--output", out.plan_out, error)) {
      if (!error.empty()) return UsageError(error);
      out.have_plan_out = true;
      continue;
    }
    if (TakeValue(args, i, "--profile", out.profile_path, error)) {
      if (!error.empty()) return UsageError(error);
      if (out.profile_path.empty()) return UsageError("--profile needs a hardware profile file");
      continue;
    }
    if (TakeValue(args, i, "--cpu-budget", budget_text, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    if (arg.starts_with("-") && arg != "-")
      return UsageError("unknown option `" + arg + "` for compile");
    if (!out.spec_path.empty()) {
      return UsageError("compile takes one SPEC; got `" + out.spec_path + "` and `" + arg + "`");
    }
    out.spec_path = arg;
  }
  if (out.spec_path.empty()) return UsageError("compile needs a SPEC file");
  if (!budget_text.empty()) {
    int& budget = out.cpu_budget;
    auto [end, ec] =
        std::from_chars(budget_text.data(), budget_text.data() + budget_text.size(), budget);
    if (ec != std::errc() || end != budget_text.data() + budget_text.size() || budget < 1 ||
        budget > HardwareProfile::kMaxCores) {
      return UsageError("--cpu-budget needs a whole number of cores in 1.." +
                        std::to_string(HardwareProfile::kMaxCores) + ", got `" + budget_text + "`");
    }
  }
  return ParseEmit(emit, out);
}

// Prints why `c` failed (an error, or the spec's diagnostics); true when it did.
bool ReportFailure(const Result<Compilation>& c) {
  if (!c) {
    std::cerr << c.error().ToString() << "\n";
    return true;
  }
  if (c->has_errors()) {
    std::cerr << c->diagnostics();
    return true;
  }
  return false;
}

// --emit=spec: the front end alone, so that the spec is printed even when a
// later step fails. 0 on success, else 1 (printed).
int EmitSpec(const CompileOptions& options) {
  CompileOptions parse = options;
  parse.parse_only = true;
  auto parsed = sluice::Compile(parse);
  if (ReportFailure(parsed)) return 1;
  std::cout << EmitSpecYaml(parsed->impl().spec);
  return 0;
}

}  // namespace

int Compile(const Args& args) {
  CompileArgs a;
  if (int rc = ParseCompileArgs(args, a); rc != 0 || a.help) return rc;
  CompileOptions options;
  options.spec_path = a.spec_path;
  options.profile_path = a.profile_path;
  options.cpu_budget = a.cpu_budget;
  options.stop_after = a.stop_after;
  if (a.emit_spec) {
    if (int rc = EmitSpec(options); rc != 0 || !a.have_plan_out) return rc;
  }
  // On a terminal, a compile that takes more than a second shows its elapsed
  // time (through code generation: WritePlan builds kernels.so).
  Progress bar("compile", 0, "s", {.delay_seconds = 1});
  bar.StartTicker();
  bar.SetNote("front end and passes");
  auto compilation = sluice::Compile(options);
  if (!a.have_plan_out || !compilation || compilation->has_errors()) bar.Finish();
  if (ReportFailure(compilation)) return 1;
  if (a.emit_ir) {
    bar.Clear();  // the IR goes to stdout, which may be the same terminal
    std::cout << compilation->ir_text() << std::flush;
  }

  if (a.have_plan_out) {
    if (!a.stop_after.empty()) {
      return UsageError(
          "-o writes the plan after every pass; drop --emit=ir-after=" + a.stop_after + " or -o");
    }
    if (a.plan_out.empty()) return UsageError("-o needs a plan directory name");
    bar.SetNote("generating kernels.so");
    Status written = compilation->WritePlan(a.plan_out);
    bar.Finish();
    if (!written) {
      std::cerr << written.error().ToString() << "\n";
      return 1;
    }
    std::cerr << "wrote " << a.plan_out << ": " << compilation->fusion_group_count()
              << " fused kernel(s); see " << a.plan_out << "/report.txt\n";
    return 0;
  }
  if (!a.emit_ir && !a.emit_spec) {
    std::cout << a.spec_path << ": ok: pipeline \"" << compilation->name() << "\", "
              << compilation->node_count() << " nodes; batch " << compilation->batch_summary()
              << "\n";
  }
  return 0;
}

}  // namespace sluice::cli
