// Shape and size arithmetic on spec values is checked: extents near 2^63 are
// errors at the step's mark, never wrapped extents (a pad of 2^63-1 once gave
// 6x6 images) nor a plan that aborts in Halide at run time (a 27000x27000
// center_crop, a crop at top 2^63-1); a huge batch `size` is an error, never a
// wrapped batch buffer size.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "compiler/ir/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"

namespace sluice {
namespace {

// A spec whose line 7 is `step` after a 32x32 resize, batched by `batch_size`.
std::string SpecWith(const std::string& step, const std::string& batch_size = "4") {
  return "sluice: 1\nname: t\nsource: {format: image_folder, path: /d}\ngraph:\n"
         "  - decode_jpeg: {in: jpg, out: image}\n"
         "  - resize: {size: [32, 32]}\n"
         "  - " +
         step + "\nbatch: {size: " + batch_size + ", fields: {image: image, label: cls}}\n";
}

// Runs the front end and every pass; the rendered diagnostics.
std::string Diagnose(const std::string& text, Graph* out = nullptr) {
  Diagnostics diags;
  Spec spec = ParseSpecText(text, "t.yaml", diags);
  if (diags.has_errors()) return diags.Render();
  Graph graph = BuildGraph(spec);
  Status s = RunPasses(graph, diags);
  if (!diags.has_errors() && !s) return s.error().ToString();
  if (out) *out = std::move(graph);
  return diags.has_errors() ? diags.Render() : "";
}

struct Case {
  std::string step, batch_size, where, says;
};

class SizeLimitTest : public testing::TestWithParam<Case> {};

TEST_P(SizeLimitTest, IsAnErrorAtTheStep) {
  const Case& c = GetParam();
  const std::string d = Diagnose(SpecWith(c.step, c.batch_size));
  EXPECT_NE(d.find(c.where + ": error: "), std::string::npos) << d;
  EXPECT_NE(d.find(c.says), std::string::npos) << d;
  EXPECT_NE(d.find("hint: "), std::string::npos) << d;
}

INSTANTIATE_TEST_SUITE_P(
    Repros, SizeLimitTest,
    testing::Values(
        // Was uint8[4,6,6,3]: 32 + 2 * (2^63-1) wrapped to 6.
        Case{"pad: {padding: [9223372036854775807]}", "4", "t.yaml:7:5",
             "`pad` with padding [9223372036854775807] would make the image's height 32 + "
             "9223372036854775807 + 9223372036854775807 pixels"},
        Case{"pad: {padding: [1, 2147483647]}", "4", "t.yaml:7:5", "image's height"},
        Case{"pad: {padding: [30000]}", "4", "t.yaml:7:5",
             "would make a 60032x60032x3 image (10811523072 elements)"},
        // Was rc 0, then SIGABRT in Halide ("Total allocation ... exceeds 2147483647").
        Case{"center_crop: {size: [27000, 27000]}", "1", "t.yaml:7:5",
             "`center_crop` would make a 27000x27000x3 image (2187000000 elements): more than "
             "2147483647 (2^31-1)"},
        // Was rc 0, then negative extents and SIGABRT.
        Case{"crop: {top: 9223372036854775807, left: 0, height: 8, width: 8}", "1", "t.yaml:7:5",
             "`crop` puts the region's bottom edge at top + height = 9223372036854775807 + 8: "
             "more than 2147483647"},
        Case{"crop: {top: 0, left: 2147483647, height: 8, width: 8}", "1", "t.yaml:7:5",
             "right edge at left + width = 2147483647 + 8"},
        Case{"random_resized_crop: {size: [50000, 50000]}", "1", "t.yaml:7:5",
             "`random_resized_crop` would make a 50000x50000x3 image"},
        Case{"resize: {size: [50000, 50000]}", "1", "t.yaml:7:5", "`resize` would make a"},
        Case{"resize: {size: [50000]}", "1", "t.yaml:7:5",
             "`resize` would make at least a 50000x50000x3 image"},
        Case{"resize: {size: [9223372036854775807, 1]}", "1", "t.yaml:7:5",
             "`resize` would make a 9223372036854775807x1x3 image"},
        // Within 2^31-1 elements but not bytes once float32: the per-sample cap.
        Case{"resize: {size: [20000, 20000]}\n  - normalize: {mean: [0.5, 0.5, 0.5], "
             "std: [0.25, 0.25, 0.25]}",
             "1", "t.yaml:8:5",
             "`normalize` makes float32[20000,20000,3] HWC, 4800000000 bytes per sample"},
        // Was batch_bytes 64 (the product wrapped).
        Case{"random_flip: {}", "9223372036854775807", "t.yaml:8:1",
             "a batch of 9223372036854775807 samples needs more than 68719476736 bytes (64 GiB)"},
        Case{"random_flip: {}", "100000000", "t.yaml:8:1", "(64 GiB) per batch buffer"}));

TEST(SizeLimits, LargeButValidShapesStillCompile) {
  Graph g;
  EXPECT_EQ(Diagnose(SpecWith("pad: {padding: [4]}")), "");
  EXPECT_EQ(Diagnose(SpecWith("center_crop: {size: [8000, 8000]}", "2"), &g), "");
  ASSERT_TRUE(g.memory.planned);
  EXPECT_EQ(g.memory.batch_bytes, 2 * 8000 * 8000 * 3 + 64);  // + the label block
  EXPECT_EQ(Diagnose(SpecWith("crop: {top: 2147483639, left: 0, height: 8, width: 8}")), "");
}

TEST(SizeLimits, LayOutBatchNeverWraps) {
  FieldMemory f;
  f.field = "image";
  f.bytes_per_sample = int64_t{1} << 40;
  const MemoryPlan plan = LayOutBatch({f}, int64_t{1} << 40);
  EXPECT_EQ(plan.batch_bytes, std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace sluice
