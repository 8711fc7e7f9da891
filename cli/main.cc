// `sluice`: the command-line entry point. Dispatches to one function per verb
// (cli.h); `sluice help` lists them.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli.h"
#include "common/log.h"
#include "ops/registry.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "unknown"
#endif

namespace sluice::cli {

std::string UsageText() {
  return R"(usage: sluice <command> [options]

commands:
  compile SPEC [--emit=ir | --emit=ir-after=PASS | --emit=spec] [-o PLAN]
      [--profile HW.yaml] [--cpu-budget N]
      Parse and check SPEC, build the IR and run the compiler passes.
      Diagnostics go to stderr; any error exits with status 1.
        --emit=ir             print the IR after all passes to stdout
        --emit=ir-after=PASS  print the IR after pass PASS (passes: see `sluice passes`)
        --emit=spec           print the validated spec, defaults explicit, as YAML
        -o PLAN               write the plan directory PLAN: plan.json, kernels.so
                              (fused kernels, CPU targets + CUDA), report.txt
        --profile HW.yaml     hardware profile (`sluice profile`): the cost model
                              predicts images/s and, with device auto, places the
                              pointwise tail on the GPU when that is faster
        --cpu-budget N        cores the loader may use in the prediction
                              (default: output.cpu_budget, else the profile's cores)
      With neither --emit nor -o, prints a one-line summary.
  run PLAN [--var NAME=VALUE]... [--batches N] [--epochs E] [--threads T]
      [--prefetch P] [--in-flight K] [--rank R --world-size W] [--seed S] [--dct-scaling]
      [--device cpu|cuda|cuda:N] [--bad-samples FILE] [--trace FILE] [--report FILE]
      Load the plan and iterate its batches (E epochs, default 1, or N batches);
      progress on stderr, then the device the GPU stages ran on, warnings,
      images/s, batch latency p50/p99/max, time the consumer waited, peak RSS
      and bad-sample counts on stdout. --device overrides output.device: cpu
      runs the whole chain on the CPU; cuda/cuda:N fails when no such device.
      Bad-sample counts: distinct bad samples (each file once per epoch) and
      bad reads; --bad-samples FILE writes each epoch's distinct bad samples as
      JSON lines {"epoch", "sample", "name", "reason"}. --trace FILE records the
      run as Chrome trace-event JSON (Perfetto UI, chrome://tracing); --report
      FILE writes a self-contained HTML report with charts (docs/observability.md).
  profile -o HW.yaml [--data PATH] [--machine TEXT] [--seconds S] [--max-files N]
      Measure this machine (cores, JPEG decode per core, fused resample and
      pointwise kernel costs, memory bandwidth, and with --data the read
      throughput and latency of PATH and its JPEGs' mean size) into a hardware
      profile (schemas/hardware.schema.json); -o - prints it. About S seconds
      (default 20). With a CUDA device also host-to-device bandwidth and kernel
      throughput; without one the profile has no gpu section.
  tune PLAN --profile HW.yaml [--var NAME=VALUE]... [--cpu-budget N]
      [--memory-budget BYTES] [--seconds S]
      Run short trials of PLAN on its real data, hill-climb threads, in_flight
      and prefetch within the budgets, print the convergence table and write
      the best knobs into PLAN/plan.json ("tuned"); the loader uses them for
      knobs the spec left auto.
  pack SPEC_OR_SOURCE -o OUT_DIR [--shard-size 256MB] [--max-side N] [--quality Q]
      [--no-restart-markers] [--threads T] [--var NAME=VALUE]...
      Write the samples of a source (a spec's source, an image folder, or a
      .csv/.tsv file list) as WebDataset tar shards OUT_DIR/shard-NNNNNN.tar
      (KEY.jpg|png, KEY.cls, KEY.json), with index.sluice (read by the
      tar_shards source) and manifest.json (counts, class names, SHA-256 per
      shard, options). --max-side re-encodes images larger than N on their
      longer side (JPEG at --quality, default 90). Baseline JPEGs are
      stored re-encoded losslessly with restart markers (the same pixels;
      the loader then decodes only the tiles a crop needs);
      --no-restart-markers stores them byte for byte. Deterministic; uses T
      threads (default all cores); progress on stderr.
  inspect PLAN [--json]
      A plan for people: versions and hashes (kernels.so checked), variables
      to bind, the graph after the passes, fusion groups, placement with the
      alternatives the cost model weighed, decode pushdown, batch memory,
      kernel targets and tuned knobs. --json: one JSON object for tools.
  inspect --data SPEC_OR_SOURCE [--json] [--decode] [--profile HW.yaml]
      [--threads T] [--var NAME=VALUE]...
      Scan a dataset (a spec's source, an image folder or a list file):
      sample count, formats, file-size and dimension histograms (headers
      only), class balance, unreadable or undecodable files (listed), and
      with --profile the cost model's decode estimate. --decode also decodes
      every image in full. Progress bar on a terminal.
  schema [--hardware] [-o FILE]
      Write the pipeline spec's JSON Schema (draft 2020-12), generated from the
      op registry, to stdout or FILE; --hardware: the hardware profile's schema.
  ops [--markdown] [--splice FILE]
      List the ops (name, class, one-line doc); with --markdown write the op
      reference; with --splice also replace the generated section of FILE
      (between its BEGIN/END GENERATED markers) instead of printing.
  verify PLAN
      Check PLAN without loading it: plan.json parses, its format and compiler
      versions are ones this sluice reads, its ops are known, its batch memory
      layout lies inside the batch buffer without overlaps, and kernels.so's
      hash matches plan.json. Prints OK and exits 0, or the problem and exits 1.
      The hash detects damage, not malice: kernels.so is machine code that
      runs in your process, so load only plans you built or trust.
  passes
      List the compiler passes in the order they run.
  help, --help, -h    this text
  --version           print the version

environment: SLUICE_LOG=debug|info|warn sets which log lines go to stderr
  (default info). Progress bars are drawn only when stderr is a terminal.

exit status: 0 ok, 1 errors in the spec (or the plan), 2 usage error or not implemented,
  70 an internal error (a bug in sluice: please report it).
)";
}

int Passes(const Args& args);
int Run(const Args& args);      // cli/run_command.cc
int Profile(const Args& args);  // cli/profile_command.cc
int Tune(const Args& args);     // cli/tune_command.cc
int Verify(const Args& args);   // cli/verify_command.cc
int Pack(const Args& args);     // cli/pack_command.cc
int Inspect(const Args& args);  // cli/inspect_command.cc

// `sluice VERB --help`: the lines of the usage text about VERB (a verb may
// have several entries, like inspect), or the whole text when it has none.
std::string CommandUsage(const std::string& verb) {
  const std::string text = UsageText();
  std::string out;
  bool in_entry = false;
  size_t pos = text.find("\n") + 1;  // past "usage: ..."
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    // An entry starts at two spaces of indentation; its description is deeper.
    if (line.starts_with("  ") && line.size() > 2 && line[2] != ' ') {
      in_entry = line.substr(2).starts_with(verb + " ") || line.substr(2) == verb;
    } else if (line.empty() || line[0] != ' ') {
      in_entry = false;
    }
    if (in_entry) out += line + "\n";
  }
  if (out.empty()) return text;
  return "usage: sluice " + out.substr(2);
}

namespace {

using Verb = int (*)(const Args&);

// Every verb, in the order `sluice help` lists them.
const std::vector<std::pair<std::string, Verb>>& Verbs() {
  static const std::vector<std::pair<std::string, Verb>> verbs = {
      {"compile", Compile}, {"run", Run},         {"profile", Profile}, {"tune", Tune},
      {"pack", Pack},       {"inspect", Inspect}, {"verify", Verify},   {"schema", Schema},
      {"ops", Ops},         {"passes", Passes},
  };
  return verbs;
}

}  // namespace

// The command `args` names; its exit code. `VERB --help` (or -h) anywhere
// among a verb's arguments prints that verb's usage and exits 0.
int Dispatch(const Args& args) {
  std::string verb = args.front();
  Args rest(args.begin() + 1, args.end());
  if (verb == "help" || verb == "--help" || verb == "-h") {
    if (!rest.empty() && rest.front() != "help" && !WantsHelp({rest.front()})) {
      return Dispatch({rest.front(), "--help"});  // `sluice help VERB`
    }
    std::cout << UsageText();
    return 0;
  }
  if (verb == "--version" || verb == "version") {
    std::cout << "sluice " << SLUICE_VERSION << "\n";
    return 0;
  }
  std::vector<std::string> names;
  for (const auto& [name, fn] : Verbs()) {
    if (verb != name) {
      names.push_back(name);
      continue;
    }
    if (WantsHelp(rest)) {
      std::cout << CommandUsage(verb);
      return 0;
    }
    return fn(rest);
  }
  if (verb.starts_with("-")) return UsageError("unknown option `" + verb + "`");
  names.push_back("help");
  const std::string near = DidYouMean(verb, names);
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return UsageError("unknown command `" + verb + "`" +
                    (near.empty() ? "" : "; did you mean `" + near + "`?") + "\ncommands: " + list);
}

}  // namespace sluice::cli

int main(int argc, char** argv) {
  using namespace sluice::cli;
  sluice::log::CurrentLevel();  // reads SLUICE_LOG now: a bad value is reported once, up front
  Args args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << UsageText();
    return 2;
  }
  // Errors are values; an exception reaching here is a bug in Sluice, and
  // says so with its text rather than aborting.
  try {
    return Dispatch(args);
  } catch (const std::exception& e) {
    std::cerr << "sluice: internal error: " << e.what()
              << "\nhint: this is a bug in sluice; please report it with the command\n";
  } catch (...) {
    std::cerr << "sluice: internal error: an unknown exception\n";
  }
  return 70;  // EX_SOFTWARE
}
