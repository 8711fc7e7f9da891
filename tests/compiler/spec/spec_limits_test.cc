// Spec limits (compiler/spec/spec_limits.h): size, nesting and alias
// expansion each give one diagnostic, in bounded time and memory.
#include "compiler/spec/spec_limits.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
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

// A valid spec's first lines; `rest` follows on line 6.
std::string Head(const std::string& rest) {
  return "sluice: 1\n"
         "name: t\n"
         "batch: {size: 4, fields: {image: image}}\n"
         "graph: [{decode_jpeg: {out: image}}]\n"
         "source: {format: image_folder, path: /data}\n" +
         rest;
}

// A "billion laughs": `levels` anchors, each a list of ten aliases of the one
// before, the first ten strings: 10^levels strings once expanded. Starts on
// line 6; the last anchor is used as a source param on the line after.
std::string Laughs(int levels) {
  std::string text = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < levels; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", " : "") + prev;
    text += "]\n";
  }
  return text;
}

TEST(SpecLimits, BillionLaughsIsOneErrorAtTheMultiplyingKey) {
  // 10^9 strings if expanded; refused after kMaxSpecNodes visits.
  const std::string e = Errors(Head(Laughs(9)));
  // l0 (11 nodes), l1 (111), ..., l4 (111111) passes 100000: its value, line 10.
  EXPECT_EQ(e,
            "t.yaml:10:5: error: the spec expands to more than 100000 YAML nodes (every alias "
            "`*name` repeats its anchor's content; nested aliases multiply, as in a YAML "
            "\"billion laughs\")\n"
            "  hint: write the values out, or use fewer levels of aliases\n");
}

TEST(SpecLimits, AliasesWithinTheBudgetAreFine) {
  // Three levels: 1000 strings; only the unknown keys are reported.
  const std::string e = Errors(Head(Laughs(3)));
  EXPECT_EQ(e.find("expands to"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown top-level key `l0`"), std::string::npos) << e;
}

TEST(SpecLimits, DeepNestingIsOneError) {
  // 100 nested flow lists: within yaml-cpp's own depth guard, over ours.
  const std::string nest = "deep: " + std::string(100, '[') + std::string(100, ']') + "\n";
  const std::string e = Errors(Head(nest));
  EXPECT_NE(e.find("t.yaml:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("nests deeper than 64 levels"), std::string::npos) << e;
  // Far deeper: yaml-cpp's own guard reports it as invalid YAML, without a
  // stack overflow.
  const std::string abyss = "deep: " + std::string(100'000, '[') + std::string(100'000, ']') + "\n";
  const std::string e2 = Errors(Head(abyss));
  EXPECT_NE(e2.find("t.yaml:6:"), std::string::npos) << e2;
  EXPECT_NE(e2.find("error: invalid YAML"), std::string::npos) << e2;
}

TEST(SpecLimits, SelfReferencingAnchorStopsAtTheDepthLimit) {
  const std::string e = Errors(Head("loop: &a [*a]\n"));
  EXPECT_NE(e.find("t.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("error:"), std::string::npos) << e;
}

TEST(SpecLimits, OversizedSpecIsRefusedBeforeParsing) {
  std::string big = Head("# " + std::string(kMaxSpecBytes, 'x') + "\n");
  EXPECT_EQ(Errors(big),
            "t.yaml:1:1: error: the spec is larger than 1048576 bytes (1 MiB), the most a spec "
            "may have\n"
            "  hint: a spec describes a pipeline in a few dozen lines; is this the right file?\n");
  // Just under the limit: parsed (and valid).
  std::string fits = Head("");
  fits += "#" + std::string(kMaxSpecBytes - fits.size() - 2, 'x') + "\n";
  ASSERT_EQ(fits.size(), kMaxSpecBytes);
  EXPECT_EQ(Errors(fits), "");
}

TEST(SpecLimits, ParseSpecFileReadsAtMostTheLimit) {
  // /dev/zero never ends: the file read stops one byte past the limit.
  Diagnostics diags;
  ParseSpecFile("/dev/zero", diags);
  EXPECT_NE(diags.Render().find("/dev/zero:1:1: error: the spec is larger than"), std::string::npos)
      << diags.Render();
}

}  // namespace
}  // namespace sluice
