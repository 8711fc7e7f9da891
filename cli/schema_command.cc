// `sluice schema [--hardware] [-o FILE]` and `sluice ops [--markdown] [--splice FILE]`:
// the generated JSON Schema and op reference.
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cli/cli.h"
#include "common/hardware_profile.h"
#include "compiler/schema/op_reference.h"
#include "compiler/schema/pipeline_schema.h"
#include "ops/registry.h"

namespace sluice::cli {
namespace {

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "sluice: error: cannot write `" << path << "`\n";
    return false;
  }
  return true;
}

}  // namespace

int Schema(const Args& args) {
  std::string path, error;
  bool hardware = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << UsageText();
      return 0;
    }
    if (args[i] == "--hardware") {
      hardware = true;
      continue;
    }
    if (TakeValue(args, i, "-o", path, error) || TakeValue(args, i, "--output", path, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    return UsageError("unexpected argument `" + args[i] + "` for schema");
  }
  std::string text = hardware ? HardwareProfileSchema() : PipelineSchemaText();
  if (path.empty() || path == "-") {
    std::cout << text;
    return 0;
  }
  return WriteFile(path, text) ? 0 : 1;
}

int Ops(const Args& args) {
  bool markdown = false;
  std::string splice, error;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << UsageText();
      return 0;
    }
    if (args[i] == "--markdown") {
      markdown = true;
      continue;
    }
    if (TakeValue(args, i, "--splice", splice, error)) {
      if (!error.empty()) return UsageError(error);
      continue;
    }
    return UsageError("unexpected argument `" + args[i] + "` for ops");
  }
  if (!splice.empty() && !markdown) return UsageError("--splice needs --markdown");

  if (!markdown) {
    size_t width = 0;
    for (const OpDef* op : AllOps()) width = std::max(width, op->name.size());
    for (const OpDef* op : AllOps()) {
      std::string doc = op->doc.substr(
          0, op->doc.find(". ") == std::string::npos ? op->doc.size() : op->doc.find(". ") + 1);
      std::string cls(OpClassName(op->op_class));
      std::cout << op->name << std::string(width + 2 - op->name.size(), ' ') << cls
                << std::string(cls.size() < 10 ? 11 - cls.size() : 1, ' ') << doc << "\n";
    }
    return 0;
  }
  std::string reference = OpReferenceMarkdown();
  if (splice.empty()) {
    std::cout << reference;
    return 0;
  }
  std::ifstream in(splice, std::ios::binary);
  if (!in) {
    std::cerr << "sluice: error: cannot read `" << splice << "`\n";
    return 1;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  Result<std::string> updated = SpliceGenerated(buffer.str(), reference);
  if (!updated) {
    std::cerr << "sluice: error: " << splice << ": " << updated.error().message << "\n";
    return 1;
  }
  return WriteFile(splice, *updated) ? 0 : 1;
}

}  // namespace sluice::cli
