// Argument helpers shared by every verb (declared in cli.h): the usage error
// and `--flag value` parsing. Separate from main.cc so that the runtime-only
// `sluice` of the GPU kit (cli/runtime_only/main.cc) links them too.
#include <charconv>
#include <iostream>
#include <regex>
#include <string>

#include "cli/cli.h"

namespace sluice::cli {

int UsageError(const std::string& message) {
  std::cerr << "sluice: error: " << message << "\n"
            << "run `sluice help` for usage\n";
  return 2;
}

bool WantsHelp(const Args& args) {
  for (const std::string& arg : args) {
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

std::string ErrorText(const Error& error) {
  // Rendered diagnostics already say "error:" on each of their lines.
  static const std::regex kDiagnostic(R"(^([^\n]*:[0-9]+:[0-9]+: )?error: )");
  if (!std::regex_search(error.message, kDiagnostic)) return error.ToString();
  std::string text = error.message;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (!error.hint.empty()) text += "\n  hint: " + error.hint;
  return text;
}

bool TakeVar(const Args& args, size_t& i, std::map<std::string, std::string>& vars,
             std::string& error) {
  std::string value;
  if (!TakeValue(args, i, "--var", value, error)) return false;
  if (!error.empty()) return true;
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0) {
    error = "--var needs NAME=VALUE, got `" + value + "`";
  } else {
    vars[value.substr(0, eq)] = value.substr(eq + 1);
  }
  return true;
}

bool ParseInt(const std::string& text, int64_t& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

bool TakeValue(const Args& args, size_t& i, const std::string& flag, std::string& value,
               std::string& error) {
  const std::string& arg = args[i];
  if (arg.size() > flag.size() && arg.starts_with(flag) && arg[flag.size()] == '=') {
    value = arg.substr(flag.size() + 1);
    return true;
  }
  if (arg != flag) return false;
  if (i + 1 >= args.size()) {
    error = "option " + flag + " needs a value";
    return true;
  }
  value = args[++i];
  return true;
}

}  // namespace sluice::cli
