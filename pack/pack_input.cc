#include "pack/pack_input.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "ops/registry.h"
#include "sluice/plan.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

Result<PackInput> InputFromSpec(const std::string& path,
                                const std::map<std::string, std::string>& vars) {
  std::ifstream in(path);
  if (!in) return MakeError(ErrorCode::kNotFound, "cannot read spec " + path);
  std::stringstream text;
  text << in.rdbuf();
  Diagnostics diags;
  Spec spec = ParseSpecText(text.str(), path, diags);
  if (diags.has_errors()) return MakeError(ErrorCode::kInvalidSpec, diags.Render());
  if (spec.source.op == nullptr) return MakeError(ErrorCode::kInvalidSpec, path + ": no source");
  PackInput input{spec.source.op->name, WithDefaults(spec.source.op->params, spec.source.params)};
  for (auto& [name, value] : input.params) {
    if (!std::holds_alternative<std::string>(value.value)) continue;
    std::map<std::string, std::string> all = vars;
    // Unbound names fall back to the environment, as a shell would.
    for (size_t p = value.AsString().find("${"); p != std::string::npos;
         p = value.AsString().find("${", p + 2)) {
      const size_t end = value.AsString().find('}', p);
      if (end == std::string::npos) break;
      const std::string var = value.AsString().substr(p + 2, end - p - 2);
      if (!all.contains(var)) {
        if (const char* env = std::getenv(var.c_str())) all[var] = env;
      }
    }
    auto bound = BindVariables(value.AsString(), all, "source." + name);
    if (!bound) return std::unexpected(bound.error());
    value.value = *bound;
  }
  return input;
}

}  // namespace

Result<PackInput> ResolvePackInput(const std::string& arg,
                                   const std::map<std::string, std::string>& vars) {
  const std::string ext = fs::path(arg).extension().string();
  if (ext == ".yaml" || ext == ".yml") return InputFromSpec(arg, vars);
  std::string format;
  if (fs::is_directory(arg)) {
    format = "image_folder";
  } else if (ext == ".csv" || ext == ".tsv" || ext == ".txt") {
    format = "file_list";
  } else {
    return MakeError(ErrorCode::kInvalidArgument,
                     "`" + arg + "` is not a spec, a directory or a list file",
                     "give a spec (.yaml), an image folder, or a .csv/.tsv file list");
  }
  const OpDef* op = FindOp(format);
  ParamList params;
  params["path"] = ParamValue{arg};
  return PackInput{format, WithDefaults(op->params, std::move(params))};
}

}  // namespace sluice::runtime
