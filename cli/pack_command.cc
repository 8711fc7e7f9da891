// `sluice pack SPEC_OR_SOURCE -o OUT_DIR ...`: writes a source's samples as
// WebDataset tar shards with a Sluice index and a manifest
// (pack/packer.h says what is written; pack/pack_input.h what the input is).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "cli/cli.h"
#include "common/progress.h"
#include "pack/pack_input.h"
#include "pack/packer.h"
#include "runtime/sources/source_registry.h"

namespace sluice::cli {

int Pack(const Args& args) {
  std::string input_arg, value, error;
  std::map<std::string, std::string> vars;
  runtime::PackOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    int64_t n = 0;
    auto int_value = [&](const std::string& flag, int64_t min, int64_t max) -> bool {
      if (!error.empty()) return false;
      if (!ParseInt(value, n) || n < min || n > max) {
        error = flag + " needs an integer in " + std::to_string(min) + ".." + std::to_string(max) +
                ", got `" + value + "`";
        return false;
      }
      return true;
    };
    if (TakeValue(args, i, "-o", value, error) || TakeValue(args, i, "--output", value, error)) {
      options.out_dir = value;
    } else if (TakeValue(args, i, "--shard-size", value, error)) {
      auto bytes = runtime::ParseByteSize(value);
      if (!bytes) return UsageError("--shard-size: " + bytes.error().message);
      options.shard_size = *bytes;
    } else if (TakeValue(args, i, "--max-side", value, error)) {
      if (int_value("--max-side", 1, 1 << 20)) options.max_side = static_cast<int>(n);
    } else if (TakeValue(args, i, "--quality", value, error)) {
      if (int_value("--quality", 1, 100)) options.quality = static_cast<int>(n);
    } else if (TakeValue(args, i, "--threads", value, error)) {
      if (int_value("--threads", 1, 4096)) options.threads = static_cast<int>(n);
    } else if (args[i] == "--no-restart-markers") {
      options.restart_markers = false;  // store JPEGs byte for byte
    } else if (TakeVar(args, i, vars, error)) {
      // a bad binding is in `error`, reported below
    } else if (!args[i].empty() && args[i][0] == '-') {
      return UsageError("pack: unknown option `" + args[i] + "`");
    } else if (input_arg.empty()) {
      input_arg = args[i];
    } else {
      return UsageError("pack takes one SPEC_OR_SOURCE, got also `" + args[i] + "`");
    }
    if (!error.empty()) return UsageError(error);
  }
  if (input_arg.empty() || options.out_dir.empty()) {
    return UsageError("pack needs SPEC_OR_SOURCE and -o OUT_DIR");
  }
  auto input = runtime::ResolvePackInput(input_arg, vars);
  if (!input) {
    std::cerr << "sluice pack: " << ErrorText(input.error()) << "\n";
    return 1;
  }
  auto source = runtime::OpenSource(input->format, input->params);
  if (!source) {
    std::cerr << "sluice pack: " << ErrorText(source.error()) << "\n";
    return 1;
  }
  options.source_format = input->format;
  options.source_path = runtime::SourceParamString(input->params, "path", "");
  Progress bar("pack", (*source)->size(), "samples");  // on a terminal only
  options.progress = [&bar](uint64_t done, uint64_t total) {
    bar.SetTotal(total);
    bar.Update(done);
  };
  auto summary = runtime::PackSource(**source, options);
  bar.Finish();
  if (!summary) {
    std::cerr << "sluice pack: " << ErrorText(summary.error()) << "\n";
    return 1;
  }
  std::printf("packed %llu samples into %zu shards (%.1f MB) in %s",
              static_cast<unsigned long long>(summary->samples), summary->shards.size(),
              summary->bytes / 1e6, options.out_dir.c_str());
  if (options.max_side > 0) {
    std::printf("; %llu resized to max side %d", static_cast<unsigned long long>(summary->resized),
                options.max_side);
  }
  std::printf("\n");
  if (summary->skipped > 0) {
    std::printf("skipped %llu unreadable samples (listed in %s/%s)\n",
                static_cast<unsigned long long>(summary->skipped), options.out_dir.c_str(),
                runtime::kPackManifestFile);
  }
  return 0;
}

}  // namespace sluice::cli
