#include "pack/pack_input.h"

#include <unistd.h>

#include <filesystem>
#include <string_view>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "ops/registry.h"
#include "sluice/plan.h"

namespace sluice::runtime {
namespace {

namespace fs = std::filesystem;

Result<PackInput> InputFromSpec(const std::string& path,
                                const std::map<std::string, std::string>& vars) {
  Diagnostics diags;
  Spec spec = ParseSpecFile(path, diags);  // bounded read: the spec limits apply
  if (diags.has_errors()) return MakeError(ErrorCode::kInvalidSpec, diags.Render());
  if (spec.source.op == nullptr) return MakeError(ErrorCode::kInvalidSpec, path + ": no source");
  PackInput input{spec.source.op->name, WithDefaults(spec.source.op->params, spec.source.params)};
  // ${NAME} binds from `vars`, else from the environment, as a shell would.
  std::map<std::string, std::string> all;
  for (char** env = environ; *env != nullptr; ++env) {
    const std::string_view entry(*env);
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos) all.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  for (const auto& [name, value] : vars) all[name] = value;
  for (auto& [name, value] : input.params) {
    if (!std::holds_alternative<std::string>(value.value)) continue;
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
