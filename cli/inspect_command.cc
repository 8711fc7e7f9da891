// `sluice inspect PLAN [--json]` and
// `sluice inspect --data SPEC_OR_SOURCE [--json] [--decode] [--profile HW.yaml]
//  [--threads T] [--var NAME=VALUE]...`: a plan or a dataset, for people or
// (--json) tools. The plan half is cli/inspect_plan.cc; the dataset scan is
// inspect/data_scan.h.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include "cli/cli.h"
#include "cli/inspect.h"
#include "common/hardware_profile.h"
#include "common/log.h"
#include "common/progress.h"
#include "inspect/data_scan.h"
#include "pack/pack_input.h"
#include "runtime/sources/source_registry.h"

namespace sluice::cli {
namespace {

int InspectData(const std::string& input_arg, const std::map<std::string, std::string>& vars,
                const inspect::DataScanOptions& base, bool as_json) {
  auto input = runtime::ResolvePackInput(input_arg, vars);
  if (!input) {
    std::cerr << "sluice inspect: " << ErrorText(input.error()) << "\n";
    return 1;
  }
  auto source = runtime::OpenSource(input->format, input->params);
  if (!source) {
    std::cerr << "sluice inspect: " << ErrorText(source.error()) << "\n";
    return 1;
  }
  inspect::DataScanOptions options = base;
  Progress bar("inspect", (*source)->size(), "samples");
  options.progress = [&bar](uint64_t done, uint64_t) { bar.Update(done); };
  const auto start = std::chrono::steady_clock::now();
  auto scan = inspect::ScanDataset(**source, input->format,
                                   runtime::SourceParamString(input->params, "path", ""), options);
  bar.Finish();
  if (scan && log::Enabled(log::Level::kDebug)) {
    char line[160];
    std::snprintf(line, sizeof line, "scanned %llu samples in %.2f s%s",
                  static_cast<unsigned long long>(scan->samples),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                  options.full_decode ? " (full decode)" : " (headers)");
    log::Debug("inspect", line);
  }
  if (!scan) {
    std::cerr << "sluice inspect: " << ErrorText(scan.error()) << "\n";
    return 1;
  }
  if (as_json) {
    // Sample names need not be UTF-8: bad bytes become U+FFFD.
    std::cout << scan->ToJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << scan->ToText();
  }
  return 0;
}

}  // namespace

int Inspect(const Args& args) {
  std::string target, data, profile_path, threads_text, error;
  std::map<std::string, std::string> vars;
  bool as_json = false, full_decode = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--json") {
      as_json = true;
    } else if (arg == "--decode") {
      full_decode = true;
    } else if (TakeValue(args, i, "--data", data, error) ||
               TakeValue(args, i, "--profile", profile_path, error) ||
               TakeValue(args, i, "--threads", threads_text, error) ||
               TakeVar(args, i, vars, error)) {
      if (!error.empty()) return UsageError(error);
    } else if (arg.starts_with("-")) {
      return UsageError("inspect: unknown option `" + arg + "`");
    } else if (target.empty()) {
      target = arg;
    } else {
      return UsageError("inspect takes one PLAN (or --data SPEC_OR_SOURCE), got also `" + arg +
                        "`");
    }
  }
  if (data.empty()) {
    if (target.empty()) return UsageError("inspect needs a PLAN or --data SPEC_OR_SOURCE");
    if (full_decode || !profile_path.empty() || !threads_text.empty() || !vars.empty()) {
      return UsageError(
          "inspect PLAN takes only --json; --decode, --profile, --threads and --var "
          "are for --data");
    }
    return InspectPlan(target, as_json);
  }
  if (!target.empty()) return UsageError("inspect takes a PLAN or --data, not both");
  inspect::DataScanOptions options;
  options.full_decode = full_decode;
  if (!threads_text.empty()) {
    int64_t n = 0;
    if (!ParseInt(threads_text, n) || n < 1 || n > 4096) {
      return UsageError("--threads needs an integer in 1..4096, got `" + threads_text + "`");
    }
    options.threads = static_cast<int>(n);
  }
  std::optional<HardwareProfile> profile;
  if (!profile_path.empty()) {
    auto loaded = LoadHardwareProfile(profile_path);
    if (!loaded) {
      std::cerr << loaded.error().ToString() << "\n";
      return 1;
    }
    profile = std::move(*loaded);
    options.profile = &*profile;
  }
  return InspectData(data, vars, options, as_json);
}

}  // namespace sluice::cli
