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

int Compile(const Args& args) {
  std::string spec_path, emit, plan_out, profile_path, budget_text, error;
  bool have_plan_out = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << UsageText();
      return 0;
    }
    if (TakeValue(args, i, "--emit", emit, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    if (TakeValue(args, i, "-o", plan_out, error) ||
        TakeValue(args, i, "--output", plan_out, error)) {
      if (!error.empty()) return UsageError(error);
      have_plan_out = true;
      continue;
    }
    if (TakeValue(args, i, "--profile", profile_path, error)) {
      if (!error.empty()) return UsageError(error);
      if (profile_path.empty()) return UsageError("--profile needs a hardware profile file");
      continue;
    }
    if (TakeValue(args, i, "--cpu-budget", budget_text, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    if (arg.starts_with("-") && arg != "-")
      return UsageError("unknown option `" + arg + "` for compile");
    if (!spec_path.empty()) {
      return UsageError("compile takes one SPEC; got `" + spec_path + "` and `" + arg + "`");
    }
    spec_path = arg;
  }
  if (spec_path.empty()) return UsageError("compile needs a SPEC file");
  int cpu_budget = -1;
  if (!budget_text.empty()) {
    auto [end, ec] =
        std::from_chars(budget_text.data(), budget_text.data() + budget_text.size(), cpu_budget);
    if (ec != std::errc() || end != budget_text.data() + budget_text.size() || cpu_budget < 1) {
      return UsageError("--cpu-budget needs a whole number of cores >= 1, got `" + budget_text +
                        "`");
    }
  }

  std::string stop_after;
  bool emit_ir = false, emit_spec = false;
  if (emit == "ir") {
    emit_ir = true;
  } else if (emit.starts_with("ir-after=")) {
    emit_ir = true;
    stop_after = emit.substr(std::string("ir-after=").size());
    if (FindPass(stop_after) == nullptr) {
      return UsageError("unknown pass `" + stop_after +
                        "` in --emit=ir-after; passes, in order: " + PassNames());
    }
  } else if (emit == "spec") {
    emit_spec = true;
  } else if (!emit.empty()) {
    return UsageError("unknown --emit value `" + emit +
                      "`; use --emit=ir, --emit=ir-after=PASS or --emit=spec");
  }

  CompileOptions options;
  options.spec_path = spec_path;
  options.profile_path = profile_path;
  options.cpu_budget = cpu_budget;
  options.stop_after = stop_after;
  if (emit_spec) {
    // The front end alone first: the spec is printed even when a later step fails.
    CompileOptions parse = options;
    parse.parse_only = true;
    auto parsed = sluice::Compile(parse);
    if (!parsed) {
      std::cerr << parsed.error().ToString() << "\n";
      return 1;
    }
    if (parsed->has_errors()) {
      std::cerr << parsed->diagnostics();
      return 1;
    }
    std::cout << EmitSpecYaml(parsed->impl().spec);
    if (!have_plan_out) return 0;
  }
  // On a terminal, a compile that takes more than a second shows its elapsed
  // time (through code generation: WritePlan builds kernels.so).
  Progress bar("compile", 0, "s", {.delay_seconds = 1});
  bar.StartTicker();
  bar.SetNote("front end and passes");
  auto compilation = sluice::Compile(options);
  if (!have_plan_out || !compilation || compilation->has_errors()) bar.Finish();
  if (!compilation) {
    std::cerr << compilation.error().ToString() << "\n";
    return 1;
  }
  if (compilation->has_errors()) {
    std::cerr << compilation->diagnostics();
    return 1;
  }
  if (emit_ir) {
    bar.Clear();  // the IR goes to stdout, which may be the same terminal
    std::cout << compilation->ir_text() << std::flush;
  }

  if (have_plan_out) {
    if (!stop_after.empty()) {
      return UsageError("-o writes the plan after every pass; drop --emit=ir-after=" + stop_after +
                        " or -o");
    }
    if (plan_out.empty()) return UsageError("-o needs a plan directory name");
    bar.SetNote("generating kernels.so");
    Status written = compilation->WritePlan(plan_out);
    bar.Finish();
    if (!written) {
      std::cerr << written.error().ToString() << "\n";
      return 1;
    }
    std::cerr << "wrote " << plan_out << ": " << compilation->fusion_group_count()
              << " fused kernel(s); see " << plan_out << "/report.txt\n";
    return 0;
  }
  if (!emit_ir && !emit_spec) {
    std::cout << spec_path << ": ok: pipeline \"" << compilation->name() << "\", "
              << compilation->node_count() << " nodes; batch " << compilation->batch_summary()
              << "\n";
  }
  return 0;
}

}  // namespace sluice::cli
