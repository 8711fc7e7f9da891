// Tests of the spec front end (compiler/spec/parser.cc): the example spec
// parses with defaults, SSA names and marks; every class of mistake gives the
// exact diagnostic text, and all mistakes of a spec are reported in one run.
#include <gtest/gtest.h>

#include <string>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "ops/registry.h"

namespace sluice {
namespace {

// Parses `text` as "t.yaml" and returns the rendered diagnostics.
std::string Errors(const std::string& text) {
  Diagnostics diags;
  ParseSpecText(text, "t.yaml", diags);
  return diags.Render();
}

// A complete spec around `graph` (list items, each on its own line, indented by
// two spaces) and `batch_fields`. The graph starts on line 6.
std::string Doc(const std::string& graph, const std::string& batch_fields = "{image: image}",
                const std::string& extra = "") {
  return "sluice: 1\n"
         "name: t\n"
         "source: {format: image_folder, path: /data}\n"
         "batch: {size: 4, fields: " +
         batch_fields +
         "}\n"
         "graph:\n" +
         graph + extra;
}

Spec Parse(const std::string& text, Diagnostics& diags) {
  return ParseSpecText(text, "t.yaml", diags);
}

TEST(SpecParser, ImagenetTrainExampleParses) {
  Diagnostics diags;
  Spec spec =
      ParseSpecFile(std::string(SLUICE_SOURCE_DIR) + "/examples/imagenet_train.yaml", diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_EQ(spec.version, 1);
  EXPECT_EQ(spec.name, "imagenet_train");

  ASSERT_NE(spec.source.op, nullptr);
  EXPECT_EQ(spec.source.op->name, "image_folder");
  EXPECT_EQ(spec.source.params.at("path").AsString(), "${DATA}/train");  // kept verbatim
  EXPECT_EQ(spec.source.outputs, (std::vector<std::string>{"jpg", "cls"}));
  EXPECT_EQ(spec.source.mark.line, 7);  // the `format` value
  EXPECT_EQ(spec.source.mark.column, 11);

  // Sampling: given values and filled defaults.
  EXPECT_EQ(spec.sampling.at("order").AsString(), "shuffle");
  EXPECT_EQ(spec.sampling.at("seed").AsInt(), 0);
  EXPECT_EQ(spec.sampling.at("shuffle_buffer").AsInt(), 10000);
  EXPECT_EQ(spec.sampling.at("rank").AsInt(), -1);  // auto
  EXPECT_EQ(spec.sampling_marks.at("remainder").line, 13);

  ASSERT_EQ(spec.graph.size(), 6u);
  const char* ops[] = {"decode_jpeg", "random_resized_crop", "random_flip", "normalize", "layout",
                       "cast"};
  const char* ins[] = {"jpg", "image", "image.1", "image.2", "image.3", "image.4"};
  const char* outs[] = {"image", "image.1", "image.2", "image.3", "image.4", "image.5"};
  for (size_t i = 0; i < 6; ++i) {
    const SpecStep& s = spec.graph[i];
    ASSERT_NE(s.op, nullptr);
    EXPECT_EQ(s.op->name, ops[i]);
    EXPECT_EQ(s.inputs, std::vector<std::string>{ins[i]}) << ops[i];
    EXPECT_EQ(s.outputs, std::vector<std::string>{outs[i]}) << ops[i];
    EXPECT_EQ(s.mark.line, 15 + static_cast<int>(i)) << ops[i];
    EXPECT_EQ(s.mark.column, 5) << ops[i];
    EXPECT_EQ(s.mark.file, std::string(SLUICE_SOURCE_DIR) + "/examples/imagenet_train.yaml");
    // Every declared parameter with a default is present.
    for (const ParamDef& def : s.op->params) {
      if (def.default_value || def.required) {
        EXPECT_TRUE(s.params.contains(def.name)) << ops[i] << "." << def.name;
      }
    }
  }
  EXPECT_TRUE(spec.graph[0].explicit_out);
  EXPECT_FALSE(spec.graph[1].explicit_out);
  EXPECT_EQ(spec.graph[0].input_marks[0].line, 15);  // `in: jpg`
  EXPECT_EQ(spec.graph[0].input_marks[0].column, 23);
  EXPECT_EQ(spec.graph[0].params.at("color").AsString(), "rgb");
  const SpecStep& rrc = spec.graph[1];
  EXPECT_EQ(rrc.params.at("size").AsIntList(), (std::vector<int64_t>{224, 224}));
  EXPECT_EQ(rrc.params.at("scale").AsFloatList(), (std::vector<double>{0.08, 1.0}));
  EXPECT_EQ(rrc.param_marks.at("scale").line, 16);
  EXPECT_EQ(rrc.param_marks.at("scale").column, 52);
  EXPECT_FALSE(rrc.param_marks.contains("interpolation"));  // defaulted, not written
  EXPECT_TRUE(rrc.params.contains("interpolation"));
  EXPECT_EQ(spec.graph[2].params.at("vertical").AsFloat(), 0.0);  // default
  EXPECT_EQ(spec.graph[5].params.at("dtype").AsString(), "float16");

  // Batch: inputs in field-name order, resolved to the final definitions.
  ASSERT_NE(spec.batch.op, nullptr);
  EXPECT_EQ(spec.batch.op->name, "batch");
  EXPECT_EQ(spec.batch.outputs, (std::vector<std::string>{"image", "label"}));
  EXPECT_EQ(spec.batch.inputs, (std::vector<std::string>{"image.5", "cls"}));
  EXPECT_EQ(spec.batch.params.at("size").AsInt(), 256);
  EXPECT_EQ(spec.batch.input_marks[1].line, 23);

  // Output: a nested section and auto knobs.
  EXPECT_EQ(spec.output.at("device").AsString(), "auto");
  EXPECT_EQ(spec.output.at("threads").AsInt(), -1);
  EXPECT_EQ(spec.output.at("ordering").AsString(), "strict");  // default
  const ParamList& on_error = spec.output.at("on_error").AsSection();
  EXPECT_EQ(on_error.at("policy").AsString(), "skip");
  EXPECT_DOUBLE_EQ(on_error.at("max_fraction").AsFloat(), 0.001);
  EXPECT_EQ(spec.output_marks.at("on_error.policy").line, 29);
}

TEST(SpecParser, ImagenetEvalExampleParses) {
  Diagnostics diags;
  Spec spec = ParseSpecFile(std::string(SLUICE_SOURCE_DIR) + "/examples/imagenet_eval.yaml", diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  ASSERT_EQ(spec.graph.size(), 6u);
  // A scalar where a list of length 1 or 2 is allowed becomes a 1-list.
  EXPECT_EQ(spec.graph[1].params.at("size").AsIntList(), std::vector<int64_t>{256});
  EXPECT_EQ(spec.output.at("on_error").AsSection().at("policy").AsString(), "fail");
  // A section given partly still gets its other defaults.
  EXPECT_DOUBLE_EQ(spec.output.at("on_error").AsSection().at("max_fraction").AsFloat(), 0.001);
}

TEST(SpecParser, DefaultsWhenSectionsAndParamsAreOmitted) {
  Diagnostics diags;
  Spec spec = Parse(Doc("  - decode_jpeg:\n"
                        "  - random_flip: {}\n"
                        "  - center_crop: {size: 8}\n",
                        "{image: jpg}"),
                    diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  ASSERT_EQ(spec.graph.size(), 3u);
  // The first step reads the source's first output; `out` defaults to the input name.
  EXPECT_EQ(spec.graph[0].inputs, std::vector<std::string>{"jpg"});
  EXPECT_EQ(spec.graph[0].outputs, std::vector<std::string>{"jpg.1"});
  EXPECT_EQ(spec.graph[1].outputs, std::vector<std::string>{"jpg.2"});
  EXPECT_EQ(spec.graph[0].params.at("color").AsString(), "rgb");
  EXPECT_DOUBLE_EQ(spec.graph[1].params.at("horizontal").AsFloat(), 0.5);
  // Batch fields name tensors as the user wrote them: the final definition.
  EXPECT_EQ(spec.batch.inputs, std::vector<std::string>{"jpg.3"});
  EXPECT_EQ(spec.sampling.at("order").AsString(), "shuffle");
  EXPECT_EQ(spec.output.at("device").AsString(), "auto");
  EXPECT_EQ(spec.output.at("on_error").AsSection().at("policy").AsString(), "skip");
}

TEST(SpecParser, ForwardReferencesAreSortedTopologically) {
  Diagnostics diags;
  // Written out of order: the crop reads `big`, defined by the step after it.
  Spec spec = Parse(Doc("  - center_crop: {in: big, out: small, size: 8}\n"
                        "  - resize: {in: image, out: big, size: 16}\n"
                        "  - decode_jpeg: {in: jpg, out: image}\n",
                        "{image: small, label: cls}"),
                    diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  ASSERT_EQ(spec.graph.size(), 3u);
  EXPECT_EQ(spec.graph[0].op->name, "decode_jpeg");
  EXPECT_EQ(spec.graph[1].op->name, "resize");
  EXPECT_EQ(spec.graph[2].op->name, "center_crop");
  EXPECT_EQ(spec.graph[1].inputs, std::vector<std::string>{"image"});
  EXPECT_EQ(spec.graph[2].inputs, std::vector<std::string>{"big"});
  EXPECT_EQ(spec.batch.inputs, (std::vector<std::string>{"small", "cls"}));
}

TEST(SpecParser, RebindingAndBranchesGetUniqueNames) {
  Diagnostics diags;
  // Two views of one decoded image; each view is rebound by a flip.
  Spec spec = Parse(Doc("  - decode_jpeg: {out: image}\n"
                        "  - center_crop: {in: image, out: a, size: 8}\n"
                        "  - random_flip: {}\n"
                        "  - center_crop: {in: image, out: b, size: 8}\n"
                        "  - random_flip: {}\n",
                        "{a: a, b: b}"),
                    diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  ASSERT_EQ(spec.graph.size(), 5u);
  EXPECT_EQ(spec.graph[2].inputs, std::vector<std::string>{"a"});
  EXPECT_EQ(spec.graph[2].outputs, std::vector<std::string>{"a.1"});
  EXPECT_EQ(spec.graph[3].inputs, std::vector<std::string>{"image"});
  EXPECT_EQ(spec.graph[4].outputs, std::vector<std::string>{"b.1"});
  EXPECT_EQ(spec.batch.inputs, (std::vector<std::string>{"a.1", "b.1"}));
}

TEST(SpecParser, AutoIntsAndVariablesInStrings) {
  Diagnostics diags;
  Spec spec = Parse(Doc("  - decode_jpeg: {}\n", "{image: jpg}",
                        "output: {threads: 4, prefetch: auto, device: 'cuda:0'}\n"
                        "sampling: {rank: 1, world_size: 2}\n"),
                    diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_EQ(spec.output.at("threads").AsInt(), 4);
  EXPECT_EQ(spec.output.at("prefetch").AsInt(), -1);
  EXPECT_EQ(spec.output.at("device").AsString(), "cuda:0");
  EXPECT_EQ(spec.sampling.at("world_size").AsInt(), 2);
}

// ---- errors -------------------------------------------------------------------

TEST(SpecParserErrors, UnknownOpWithSuggestion) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - random_resize_crop: {size: 8}\n")),
            "t.yaml:7:5: error: unknown op `random_resize_crop`\n"
            "  hint: did you mean `random_resized_crop`?\n");
}

TEST(SpecParserErrors, UnknownParamListsValidNamesWhenNothingIsClose) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image, quality: 3}\n")),
            "t.yaml:6:31: error: unknown parameter `quality` in `decode_jpeg`\n"
            "  hint: valid parameters: `color`, `orientation`, `max_pixels`, `in`, `out`\n");
}

TEST(SpecParserErrors, ParameterTypes) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - resize: {size: [a, 8], antialias: 1}\n"
                       "  - random_flip: {horizontal: '0.5'}\n")),
            "t.yaml:7:21: error: each element of `resize.size` must be an integer, got `a`\n"
            "  hint: e.g. `size: [224, 224]`\n"
            "t.yaml:7:39: error: `resize.antialias` must be `true` or `false`, got `1`\n"
            "  hint: e.g. `antialias: true`\n"
            "t.yaml:8:31: error: `random_flip.horizontal` must be a number, got `0.5`\n"
            "  hint: e.g. `horizontal: 0.5`\n");
}

TEST(SpecParserErrors, ListElementOutOfRangeAndLength) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - random_resized_crop: {size: [8, 8], scale: [0.5, 2]}\n"
                       "  - normalize: {mean: [1, 2], std: 1}\n")),
            "t.yaml:7:54: error: each element of `random_resized_crop.scale` must be between 0 "
            "and 1, got `2`\n"
            "  hint: e.g. `scale: [0.08,1]`\n"
            "t.yaml:8:23: error: `normalize.mean` must be a number or a list of 3 numbers, got 2 "
            "elements\n"
            "  hint: e.g. `mean: [0.485, 0.456, 0.406]`\n");
}

TEST(SpecParserErrors, SeveralAllowedListLengths) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - pad: {padding: [1, 2, 3]}\n")),
            "t.yaml:7:20: error: `pad.padding` must be an integer or a list of 2 or 4 integers, "
            "got 3 elements\n"
            "  hint: e.g. `padding: [0, 0, 0, 0]`\n");
}

TEST(SpecParserErrors, EnumWithoutCloseMatchHasNoHint) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - cast: {dtype: half}\n")),
            "t.yaml:7:19: error: `cast.dtype` must be one of `uint8`, `float16`, `bfloat16`, "
            "`float32`, got `half`\n");
}

TEST(SpecParserErrors, MissingRequiredParamPointsAtTheOp) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - center_crop:\n")),
            "t.yaml:7:5: error: missing required parameter `size` in `center_crop`\n"
            "  hint: add it, e.g. `center_crop: {size: [224, 224]}`\n");
}

TEST(SpecParserErrors, VariablesOnlyInStrings) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - resize: {size: [\"${S}\", 8]}\n"
                       "  - center_crop: {size: 8}\n",
                       "{image: image}", "sampling:\n  seed: ${SEED}\n")),
            "t.yaml:7:21: error: `resize.size` uses `${S}`, but variables are only allowed in "
            "string fields\n"
            "  hint: write an integer or a list of 2 integers here; variables bind when the plan "
            "is loaded, after compilation\n"
            "t.yaml:10:9: error: `sampling.seed` uses `${SEED}`, but variables are only allowed "
            "in string fields\n"
            "  hint: write an integer here; variables bind when the plan is loaded, after "
            "compilation\n");
}

TEST(SpecParserErrors, MalformedVariableInString) {
  EXPECT_EQ(Errors("sluice: 1\nname: t\nsource: {format: image_folder, path: \"${DATA/x\"}\n"
                   "graph: [decode_jpeg: {}]\nbatch: {size: 1, fields: {image: jpg}}\n"),
            "t.yaml:3:38: error: bad variable reference in `source.path`: `${` without a "
            "closing `}`\n"
            "  hint: write `${NAME}` with NAME made of letters, digits and `_`\n");
}

TEST(SpecParserErrors, NestedSectionValues) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {}\n", "{image: jpg}",
                       "output:\n"
                       "  on_error: {policy: skipp, max_fraction: 2}\n"
                       "  thread: 4\n")),
            "t.yaml:8:22: error: `output.on_error.policy` must be one of `skip`, `replace`, "
            "`fail`, got `skipp`\n"
            "  hint: did you mean `skip`?\n"
            "t.yaml:8:43: error: `output.on_error.max_fraction` must be between 0 and 1, got "
            "`2`\n"
            "  hint: e.g. `max_fraction: 0.001`\n"
            "t.yaml:9:3: error: unknown key `thread` in `output`\n"
            "  hint: did you mean `threads`?\n");
}

TEST(SpecParserErrors, TopLevelShape) {
  EXPECT_EQ(Errors(""),
            "t.yaml:1:1: error: the spec is empty\n"
            "  hint: start with `sluice: 1` and a `name:`\n");
  EXPECT_EQ(Errors("- a\n- b\n"),
            "t.yaml:1:1: error: the spec must be a map of sections, got a list\n"
            "  hint: start with `sluice: 1` and a `name:`\n");
  EXPECT_EQ(Errors("# comment\nsluice: one\nname: [x]\ngraf: []\n"),
            "t.yaml:2:1: error: missing required key `source`\n"
            "  hint: add e.g. `source: {format: image_folder, path: \"${DATA}/train\"}`\n"
            "t.yaml:2:1: error: missing required key `graph`\n"
            "  hint: add a list of steps, e.g. `graph: [{decode_jpeg: {in: jpg, out: image}}]`\n"
            "t.yaml:2:1: error: missing required key `batch`\n"
            "  hint: add e.g. `batch: {size: 256, fields: {image: image, label: cls}}`\n"
            "t.yaml:2:9: error: `sluice` must be the spec version number, got `one`\n"
            "  hint: write `sluice: 1`\n"
            "t.yaml:3:7: error: `name` must be a string, got a list\n"
            "  hint: e.g. `name: imagenet_train`\n"
            "t.yaml:4:1: error: unknown top-level key `graf`\n"
            "  hint: valid keys: `sluice`, `name`, `source`, `sampling`, `graph`, `batch`, "
            "`output`\n");
  EXPECT_EQ(Errors("sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\n"
                   "graph: [decode_jpeg: {}]\nbatch: {size: 1, fields: {image: jpg}}\n"
                   "outptu: {}\n"),
            "t.yaml:6:1: error: unknown top-level key `outptu`\n"
            "  hint: did you mean `output`?\n");
}

TEST(SpecParserErrors, DuplicateKey) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {}\n", "{image: jpg}", "name: u\n")),
            "t.yaml:7:1: error: duplicate key `name`\n"
            "  hint: it was already given at line 2; keep only one\n");
}

TEST(SpecParserErrors, YamlSyntaxError) {
  EXPECT_EQ(Errors("sluice: 1\nname: [t\n"),
            "t.yaml:3:1: error: invalid YAML: end of sequence flow not found\n"
            "  hint: check the brackets, colons and indentation on this line and the one "
            "before\n");
}

TEST(SpecParserErrors, UnreadableFile) {
  Diagnostics diags;
  ParseSpecFile("/nonexistent/spec.yaml", diags);
  EXPECT_EQ(diags.Render(),
            "/nonexistent/spec.yaml: error: cannot read `/nonexistent/spec.yaml`: No such file "
            "or directory\n"
            "  hint: check the path\n");
}

// Every source parameter keeps its own value, whatever the keys' order
// (`format` first used to shift each value onto the previous key).
TEST(SpecParser, SourceParamsKeepTheirValues) {
  for (const std::string& source :
       {std::string("{format: file_list, path: /l.csv, path_column: file, label_column: y}"),
        std::string("{path: /l.csv, format: file_list, label_column: y, path_column: file}")}) {
    Diagnostics diags;
    Spec spec = Parse("sluice: 1\nname: t\nsource: " + source +
                          "\ngraph: [decode_jpeg: {}]\nbatch: {size: 1, fields: {image: jpg}}\n",
                      diags);
    ASSERT_FALSE(diags.has_errors()) << diags.Render();
    EXPECT_EQ(spec.source.params.at("path").AsString(), "/l.csv") << source;
    EXPECT_EQ(spec.source.params.at("path_column").AsString(), "file") << source;
    EXPECT_EQ(spec.source.params.at("label_column").AsString(), "y") << source;
  }
  Diagnostics diags;
  Spec spec = Parse(
      "sluice: 1\nname: t\nsource: {format: tar_shards, path: \"${D}/s-{0..3}.tar\", image: "
      "png, label: txt}\ngraph: [decode_png: {}]\nbatch: {size: 1, fields: {image: jpg}}\n",
      diags);
  ASSERT_FALSE(diags.has_errors()) << diags.Render();
  EXPECT_EQ(spec.source.params.at("path").AsString(), "${D}/s-{0..3}.tar");
  EXPECT_EQ(spec.source.params.at("image").AsString(), "png");
  EXPECT_EQ(spec.source.params.at("label").AsString(), "txt");
  EXPECT_EQ(spec.source.params.at("index").AsString(), "");
}

TEST(SpecParserErrors, SourceProblems) {
  EXPECT_EQ(Errors("sluice: 1\nname: t\nsource: {path: /d}\ngraph: [decode_jpeg: {}]\n"
                   "batch: {size: 1, fields: {image: jpg}}\n"),
            "t.yaml:3:1: error: missing required key `format` in `source`\n"
            "  hint: name the kind of source: `file_list`, `image_folder` or `tar_shards`\n");
  EXPECT_EQ(Errors("sluice: 1\nname: t\nsource: {format: file_list, pth: /d}\n"
                   "graph: [decode_jpeg: {}]\nbatch: {size: 1, fields: {image: jpg}}\n"),
            "t.yaml:3:18: error: missing required parameter `path` in `source`\n"
            "  hint: add it, e.g. `path: \"${DATA}/train\"`\n"
            "t.yaml:3:29: error: unknown parameter `pth` in `source`\n"
            "  hint: did you mean `path`?\n");
}

TEST(SpecParserErrors, GraphShape) {
  EXPECT_EQ(Errors(Doc("  []\n")),
            "t.yaml:6:3: error: `graph` must list at least one step\n"
            "  hint: write one op per line, e.g. `- decode_jpeg: {in: jpg, out: image}`\n");
  EXPECT_EQ(Errors(Doc("  - decode_jpeg\n"
                       "  - image_folder: {}\n"
                       "  - batch: {}\n"
                       "  - resize: 256\n",
                       "{label: cls}")),
            "t.yaml:6:5: error: a graph step must be a map with one key, the op name, got "
            "`decode_jpeg`\n"
            "  hint: write `- decode_jpeg: {}`\n"
            "t.yaml:7:5: error: `image_folder` is a source format, not a graph op\n"
            "  hint: put it under `source:`, e.g. `source: {format: image_folder, ...}`\n"
            "t.yaml:8:5: error: `batch` is a top-level section, not a graph op\n"
            "  hint: move it out of `graph:`, e.g. `batch: {size: 256, fields: {image: image}}`\n"
            "t.yaml:9:13: error: the parameters of `resize` must be a map, got `256`\n"
            "  hint: e.g. `- resize: {param: value}`, or `- resize: {}` for the defaults\n");
}

TEST(SpecParserErrors, NonScalarKeys) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - ? [resize]\n"
                       "    : {size: 8}\n")),
            "t.yaml:7:7: error: a key must be a plain name\n"
            "  hint: write `name: value`\n");
}

TEST(SpecParserErrors, InputCountAndBadNames) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - resize: {in: [image, jpg], size: 8}\n"
                       "  - center_crop: {out: my-crop, size: 8}\n"
                       "  - random_flip: {in: [], out: x}\n",
                       "{image: image}")),
            "t.yaml:7:18: error: `resize` takes 1 input, got 2 (`image`, `jpg`)\n"
            "  hint: name one tensor, e.g. `in: image`\n"
            "t.yaml:8:24: error: tensor name `my-crop` is not valid\n"
            "  hint: use letters, digits and `_`, starting with a letter or `_`\n"
            "t.yaml:9:23: error: `in` of `random_flip` is an empty list\n"
            "  hint: name the tensor to read, e.g. `in: image`\n");
}

TEST(SpecParserErrors, DanglingSelfAndAmbiguousReferences) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - random_flip: {in: flipped, out: flipped}\n"
                       "  - resize: {in: later, out: r, size: 8}\n"
                       "  - center_crop: {in: image, out: later, size: 8}\n"
                       "  - center_crop: {in: image, out: later, size: 4}\n",
                       "{image: image}")),
            "t.yaml:7:23: error: unknown tensor `flipped` read by `random_flip`\n"
            "  hint: defined tensors: `jpg`, `cls`, `image`, `r`, `later`\n"
            "t.yaml:8:18: error: `resize` reads `later` before any step defines it, and several "
            "later steps define it (lines 9, 10)\n"
            "  hint: give the tensor it should read a unique `out:` name\n"
            "t.yaml:10:35: error: tensor `later` is already defined\n"
            "  hint: it is first defined by `center_crop` at line 9; choose a new name, or read "
            "it with `in: later` to replace it\n");
}

TEST(SpecParserErrors, DuplicateOfASourceTensor) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: cls}\n", "{image: cls}")),
            "t.yaml:6:24: error: tensor `cls` is already defined\n"
            "  hint: it is first defined by the source (`image_folder`, line 3); choose a new "
            "name, or read it with `in: cls` to replace it\n");
}

TEST(SpecParserErrors, CycleOfThreeNamesItsOpsInOrder) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - resize: {in: c, out: a, size: 8}\n"
                       "  - center_crop: {in: a, out: b, size: 8}\n"
                       "  - random_flip: {in: b, out: c}\n",
                       "{image: c}")),
            "t.yaml:7:5: error: the graph has a cycle: `resize` -> `center_crop` -> "
            "`random_flip` -> `resize`\n"
            "  hint: `resize` (line 7) reads `c` from `random_flip` (line 9), which reads `b` "
            "from `center_crop` (line 8), which reads `a` from `resize`; rename an `in:` or "
            "`out:` to break the loop\n");
}

TEST(SpecParserErrors, BatchProblems) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n", "{image: imag, label: [cls]}")),
            "t.yaml:4:34: error: batch field `image` names unknown tensor `imag`\n"
            "  hint: did you mean `image`?\n"
            "t.yaml:4:47: error: `batch.fields.label` must be a string, got a list\n"
            "  hint: e.g. `fields: {image: image, label: cls}`\n");
  EXPECT_EQ(Errors("sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\n"
                   "graph: [decode_jpeg: {}]\nbatch: {size: 0}\n"),
            "t.yaml:5:1: error: missing required key `fields` in `batch`\n"
            "  hint: add it, e.g. `fields: {image: image, label: cls}`\n"
            "t.yaml:5:15: error: `batch.size` must be at least 1, got `0`\n"
            "  hint: e.g. `size: 256`\n");
}

TEST(SpecParserErrors, OpChecksPointAtTheParameter) {
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {out: image}\n"
                       "  - random_resized_crop: {size: 8, ratio: [2, 0.5]}\n")),
            "t.yaml:7:43: error: `ratio` bounds are reversed: [2,0.5]\n"
            "  hint: write the smaller bound first: [0.5,2]\n");
}

TEST(SpecParserErrors, AllMistakesInOneRunAndTheRestStillChecked) {
  Diagnostics diags;
  Spec spec = Parse(Doc("  - decode_jpeg: {out: decoded}\n"
                        "  - random_resize_crop: {out: image, size: 8}\n"
                        "  - random_flip: {horizontal: 2}\n"
                        "  - center_crop: {in: decoded, out: crop, size: 8}\n",
                        "{image: image, crop: crop}"),
                    diags);
  EXPECT_EQ(diags.errors().size(), 2u) << diags.Render();
  // The unknown op is left out; the flip reading its output is dropped too, so
  // that every name in the partial spec refers to a kept step.
  ASSERT_EQ(spec.graph.size(), 2u);
  EXPECT_EQ(spec.graph[0].op->name, "decode_jpeg");
  EXPECT_EQ(spec.graph[1].op->name, "center_crop");
  EXPECT_EQ(spec.graph[1].inputs, std::vector<std::string>{"decoded"});
  EXPECT_EQ(spec.batch.inputs, std::vector<std::string>{"crop"});
}

}  // namespace
}  // namespace sluice
