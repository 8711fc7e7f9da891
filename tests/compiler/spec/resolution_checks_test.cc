// Front-end checks that keep a spec from compiling into a plan that is wrong
// or cannot load: a typo'd `in:` is an unknown tensor (not a cycle), `in:`
// names are identifiers, one graph tensor fills one batch field, all decodes
// agree, batch field names are identifiers; and YAML-level mistakes (a second
// document, an unquoted ${...} in a flow map) are errors with a fix.
#include <gtest/gtest.h>

#include <string>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"

namespace sluice {
namespace {

std::string Errors(const std::string& text) {
  Diagnostics diags;
  ParseSpecText(text, "t.yaml", diags);
  return diags.Render();
}

// A spec whose graph starts on line 5 and whose batch is the last line.
std::string Doc(const std::string& graph, const std::string& fields = "{image: image}") {
  return "sluice: 1\nname: t\nsource: {format: image_folder, path: /data}\ngraph:\n" + graph +
         "batch: {size: 4, fields: " + fields + "}\n";
}

TEST(SpecResolution, TypoInAMiddleStepsInputIsAnUnknownTensorNotACycle) {
  const std::string e =
      Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                 "  - resize: {in: imgae, size: [32, 32]}\n"
                 "  - normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25]}\n",
                 "{image: imgae}"));
  EXPECT_EQ(e,
            "t.yaml:6:18: error: unknown tensor `imgae` read by `resize`\n"
            "  hint: did you mean `image`?\n")
      << e;
}

TEST(SpecResolution, ForwardReferenceToAnExplicitOutStillWorksAndRealLoopsAreCycles) {
  // A later step's explicit `out:` may be read before it (no loop).
  EXPECT_EQ(Errors(Doc("  - center_crop: {in: small, out: crop, size: 8}\n"
                       "  - decode_jpeg: {in: jpg, out: image}\n"
                       "  - resize: {in: image, out: small, size: [16, 16]}\n",
                       "{image: crop}")),
            "");
  // A loop through explicit names is still reported as a cycle.
  const std::string e =
      Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                 "  - resize: {in: cropped, out: resized, size: 256}\n"
                 "  - center_crop: {in: resized, out: cropped, size: 8}\n",
                 "{image: cropped}"));
  EXPECT_NE(e.find("t.yaml:6:5: error: the graph has a cycle"), std::string::npos) << e;
}

TEST(SpecResolution, InputNamesMustBeIdentifiers) {
  const std::string e =
      Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                 "  - resize: {in: 5, size: [32, 32]}\n"
                 "  - random_flip: {in: [image, \"a b\"]}\n"));
  EXPECT_NE(e.find("t.yaml:6:18: error: `in` of `resize`: tensor name `5` is not valid\n"
                   "  hint: name a tensor: letters, digits and `_`, starting with a letter or "
                   "`_`, e.g. `in: image`\n"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("t.yaml:7:31: error: `in` of `random_flip`: tensor name `a b` is not valid"),
            std::string::npos)
      << e;
}

TEST(SpecResolution, OneGraphTensorFillsOneBatchField) {
  const std::string e =
      Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                 "  - resize: {size: [32, 32]}\n",
                 "{image: image, image2: image}"));
  EXPECT_EQ(e,
            "t.yaml:7:49: error: batch fields `image` and `image2` both name tensor `image`; a "
            "tensor from the graph fills one field\n"
            "  hint: keep one of the two fields (copy the batch tensor in your training code if "
            "you need it twice)\n")
      << e;
  // The source's label may fill several fields (the loader writes each).
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                       "  - resize: {size: [32, 32]}\n",
                       "{image: image, l1: cls, l2: cls}")),
            "");
}

TEST(SpecResolution, BatchFieldNamesAreIdentifiers) {
  const std::string e =
      Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                 "  - resize: {size: [32, 32]}\n",
                 "{\"\": image, \"a: b\": cls, x.y: image}"));
  EXPECT_EQ(e,
            "t.yaml:7:27: error: batch field name `` is not valid\n"
            "  hint: use letters, digits and `_`, starting with a letter or `_`, e.g. `image`\n"
            "t.yaml:7:38: error: batch field name `a: b` is not valid\n"
            "  hint: use letters, digits and `_`, starting with a letter or `_`, e.g. `image`\n"
            "t.yaml:7:51: error: batch field name `x.y` is not valid\n"
            "  hint: use letters, digits and `_`, starting with a letter or `_`, e.g. `image`\n")
      << e;
}

TEST(SpecResolution, DecodesMustAgree) {
  const std::string e =
      Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                 "  - decode_jpeg: {in: jpg, out: gray, color: gray}\n"
                 "  - resize: {in: image, size: [32, 32]}\n"
                 "  - resize: {in: gray, size: [32, 32]}\n",
                 "{image: image, gray: gray}"));
  EXPECT_EQ(e,
            "t.yaml:6:46: error: this `decode_jpeg` has color: \"gray\" but the one at line 5 "
            "has color: \"rgb\"; each sample is decoded once, so every decode must match\n"
            "  hint: decode once with color: rgb and convert the gray branch, e.g. "
            "`- grayscale: {in: image, out: gray}`\n")
      << e;
  // Two equal decodes are fine.
  EXPECT_EQ(Errors(Doc("  - decode_jpeg: {in: jpg, out: image}\n"
                       "  - decode_jpeg: {in: jpg, out: other}\n"
                       "  - resize: {in: image, size: [32, 32]}\n"
                       "  - resize: {in: other, size: [16, 16]}\n",
                       "{image: image, other: other}")),
            "");
}

TEST(SpecYaml, UnquotedVariableInAFlowMapSaysToQuoteIt) {
  const std::string e = Errors(
      "sluice: 1\nname: t\nsource: {format: image_folder, path: ${DATA}/train}\ngraph:\n"
      "  - decode_jpeg: {in: jpg, out: image}\nbatch: {size: 4, fields: {image: image}}\n");
  EXPECT_NE(e.find("t.yaml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("error: invalid YAML: "), std::string::npos) << e;
  EXPECT_NE(e.find("  hint: quote values that contain ${...} inside `{...}`, e.g. "
                   "`path: \"${DATA}/train\"`\n"),
            std::string::npos)
      << e;
  // The suggested form parses.
  EXPECT_EQ(Errors("sluice: 1\nname: t\nsource: {format: image_folder, path: \"${DATA}/train\"}\n"
                   "graph:\n  - decode_jpeg: {in: jpg, out: image}\n"
                   "batch: {size: 4, fields: {image: image}}\n"),
            "");
}

TEST(SpecYaml, HintsSuggestValidYaml) {
  const std::string e = Errors(
      "sluice: 1\nname: t\ngraph: [{decode_jpeg: {}}]\n"
      "batch: {size: 4, fields: {image: image}}\n");
  EXPECT_NE(e.find("hint: add e.g. `source: {format: image_folder, path: \"${DATA}/train\"}`"),
            std::string::npos)
      << e;
}

TEST(SpecYaml, ASecondDocumentIsAnError) {
  const std::string spec = Doc("  - decode_jpeg: {in: jpg, out: image}\n");
  EXPECT_EQ(Errors(spec), "");
  EXPECT_EQ(Errors(spec + "---\nname: other\n"),
            "t.yaml:7:1: error: the file holds more than one YAML document (a second `---`); a "
            "spec is one\n"
            "  hint: remove the `---` and merge the documents, or put each spec in its own file\n");
  // An empty second document is still a second document.
  EXPECT_NE(Errors(spec + "---\n").find("t.yaml:7:1: error: the file holds more than one"),
            std::string::npos)
      << Errors(spec + "---\n");
  // A leading `---` (one document) is fine.
  EXPECT_EQ(Errors("---\n" + spec), "");
}

}  // namespace
}  // namespace sluice
