// The runtime-only `sluice` of the GPU verification kit (scripts/gpu_kit.sh,
// docs/gpu.md): the `run` verb alone, linked against the runtime without the
// compiler, Halide or LLVM, so that it runs on a machine that has none of them.
// Plans are compiled elsewhere with the full `sluice` and shipped as data.
#include <iostream>
#include <string>

#include "cli/cli.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice::cli {

int Run(const Args& args);  // cli/run_command.cc

std::string UsageText() {
  return R"(usage: sluice run PLAN [options]   (runtime-only build: no compile, profile or tune)

  run PLAN [--var NAME=VALUE]... [--batches N] [--epochs E] [--threads T]
      [--prefetch P] [--in-flight K] [--rank R --world-size W] [--seed S] [--dct-scaling]
      [--device cpu|cuda|cuda:N] [--bad-samples FILE] [--trace FILE] [--report FILE]
      Load the plan and iterate its batches; `sluice help` of the full build
      describes every option.
  help, --help, -h    this text
  --version           print the version
)";
}

}  // namespace sluice::cli

int main(int argc, char** argv) {
  using namespace sluice::cli;
  Args args(argv + 1, argv + argc);
  const std::string verb = args.empty() ? "" : args.front();
  if (verb == "help" || verb == "--help" || verb == "-h") {
    std::cout << UsageText();
    return 0;
  }
  if (verb == "--version" || verb == "version") {
    std::cout << "sluice " << SLUICE_VERSION << " (runtime only)\n";
    return 0;
  }
  if (verb == "run") {
    const Args rest(args.begin() + 1, args.end());
    if (WantsHelp(rest)) {
      std::cout << UsageText();
      return 0;
    }
    return Run(rest);
  }
  std::cerr << UsageText();
  return 2;
}
