// Source ops: where samples come from. A spec's `source: {format: NAME, ...}`
// picks the source op NAME; the remaining keys are its parameters. Every
// source produces two tensors per sample: `jpg` (the encoded file, bytes[?])
// and `cls` (its integer label, int64[]). Sources have no reference
// implementation; the runtime (runtime/sources/) implements them.
#include "ops/families.h"

namespace sluice {
namespace {

using namespace ops_internal;

Result<std::vector<TensorType>> InferSource(std::string_view op,
                                            std::span<const TensorType> inputs) {
  SLUICE_RETURN_IF_ERROR(ExpectNumInputs(op, inputs, 0));
  return std::vector<TensorType>{EncodedBytes(), Scalar(DType::kInt64)};
}

}  // namespace

void RegisterSourceOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .name = "image_folder",
      .op_class = OpClass::kSource,
      .doc = "A directory with one subdirectory per class; each file with a .jpg, .jpeg or .png "
             "extension (any case) is a sample, labelled by its subdirectory's index in sorted "
             "name order.",
      .params = {ParamDef{.name = "path",
                          .type = ParamType::kString,
                          .doc = "Root directory; may use ${VAR}, bound at load time.",
                          .required = true}},
      .output_names = {"jpg", "cls"},
      .num_inputs = 0,
      .infer = [](std::span<const TensorType> in,
                  const ParamList&) { return InferSource("image_folder", in); },
  });
  ops.push_back(OpDef{
      .name = "file_list",
      .op_class = OpClass::kSource,
      .doc = "A CSV or TSV file with a header row naming a path column and an integer label "
             "column; relative paths are resolved against the list file's directory, and must "
             "stay under it unless allow_outside_root is set.",
      .params =
          {
              ParamDef{.name = "path",
                       .type = ParamType::kString,
                       .doc = "The list file; may use ${VAR}, bound at load time.",
                       .required = true},
              ParamDef{.name = "delimiter",
                       .type = ParamType::kEnum,
                       .doc = "Field separator: auto (tab if the header has a tab, else "
                              "comma), comma or tab.",
                       .default_value = VStr("auto"),
                       .choices = {"auto", "comma", "tab"}},
              ParamDef{.name = "path_column",
                       .type = ParamType::kString,
                       .doc = "Header name of the column holding each sample's file path.",
                       .default_value = VStr("path")},
              ParamDef{.name = "label_column",
                       .type = ParamType::kString,
                       .doc = "Header name of the column holding each sample's integer label.",
                       .default_value = VStr("label")},
              ParamDef{.name = "allow_outside_root",
                       .type = ParamType::kBool,
                       .doc = "Accept absolute paths and paths leaving the list file's "
                              "directory (through '..' or a symlink). Off (default): such a "
                              "row is an error at load and such a symlink a bad sample.",
                       .default_value = VBool(false)},
          },
      .output_names = {"jpg", "cls"},
      .num_inputs = 0,
      .check =
          [](const ParamList& p) {
            std::vector<ParamIssue> issues;
            if (P(p, "path_column").AsString() == P(p, "label_column").AsString()) {
              issues.push_back({"label_column", "path_column and label_column name the same column",
                                "give the label column's own header name"});
            }
            return issues;
          },
      .infer = [](std::span<const TensorType> in,
                  const ParamList&) { return InferSource("file_list", in); },
  });
}

}  // namespace sluice
