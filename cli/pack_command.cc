// `sluice pack SPEC_OR_SOURCE -o OUT_DIR ...`: writes a source's samples as
// WebDataset tar shards with a Sluice index and a manifest
// (pack/packer.h says what is written; pack/pack_input.h what the input is).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "cli/cli.h"
#include "pack/pack_input.h"
#include "pack/packer.h"
#include "runtime/sources/source_registry.h"

namespace sluice::cli {
namespace {

// A progress line on stderr: redrawn in place on a terminal, every 10% else.
class ProgressBar {
 public:
  void operator()(uint64_t done, uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    const bool last = done == total;
    if (tty_) {
      if (!last && now - shown_ < std::chrono::milliseconds(200)) return;
    } else {
      const uint64_t decile = total == 0 ? 10 : done * 10 / total;
      if (!last && decile == decile_) return;
      decile_ = decile;
    }
    shown_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const int width = 30, filled = total == 0 ? width : static_cast<int>(done * width / total);
    std::fprintf(stderr, "%spack [%s%s] %llu/%llu samples, %.0f/s%s", tty_ ? "\r" : "",
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                 seconds > 0 ? done / seconds : 0.0, tty_ && !last ? "" : "\n");
  }

 private:
  bool tty_ = isatty(STDERR_FILENO) != 0;
  uint64_t decile_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), shown_;
};

}  // namespace

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
    std::cerr << "sluice pack: " << input.error().ToString() << "\n";
    return 1;
  }
  auto source = runtime::OpenSource(input->format, input->params);
  if (!source) {
    std::cerr << "sluice pack: " << source.error().ToString() << "\n";
    return 1;
  }
  options.source_format = input->format;
  options.source_path = runtime::SourceParamString(input->params, "path", "");
  ProgressBar bar;
  options.progress = [&bar](uint64_t done, uint64_t total) { bar(done, total); };
  auto summary = runtime::PackSource(**source, options);
  if (!summary) {
    std::cerr << "sluice pack: " << summary.error().ToString() << "\n";
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
