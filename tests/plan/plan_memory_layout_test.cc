// CheckBatchLayout and CheckMemoryLayout (plan/plan_document.h): the batch
// buffer layout check the loader and `sluice verify` share.
#include <gtest/gtest.h>

#include <string>

#include "plan/plan_document.h"

namespace sluice {
namespace {

using json = nlohmann::json;

// Two fields of a batch of 4: image (12 bytes a sample) at 0, label (8) at 64.
PlanMemoryDoc Layout() {
  PlanMemoryDoc m;
  m.batch_size = 4;
  m.fields = {{.field = "image", .bytes_per_sample = 12, .offset = 0, .staged_offset = 0},
              {.field = "label", .bytes_per_sample = 8, .offset = 64, .staged_offset = 64}};
  m.batch_bytes = 96;
  m.staged_batch_bytes = 96;
  return m;
}

const json kBatch = {{"size", 4}, {"fields", {{"image", "image"}, {"label", "cls"}}}};

std::string Problem(const std::optional<PlanMemoryDoc>& m, const json& batch = kBatch) {
  Status s = CheckMemoryLayout(m, batch, "plan `p`");
  if (s) return "";
  EXPECT_EQ(s.error().code, ErrorCode::kCorruptData);
  return s.error().message;
}

TEST(PlanMemoryLayout, AGoodLayoutPasses) {
  EXPECT_EQ(Problem(Layout()), "");
  // Touching blocks do not overlap: label at 48 ends image's [0, 48).
  PlanMemoryDoc m = Layout();
  m.fields[1].offset = 48;
  EXPECT_EQ(Problem(m), "");
}

TEST(PlanMemoryLayout, RefusesWhatTheLoaderWouldOverflow) {
  PlanMemoryDoc m = Layout();
  m.batch_bytes = 16;
  EXPECT_EQ(Problem(m),
            "plan `p`: plan.json \"memory\" places batch field `image` outside the 16-byte batch "
            "buffer");
  m = Layout();
  m.fields[1].offset = 90;  // 90 + 4 * 8 > 96
  EXPECT_NE(Problem(m).find("places batch field `label` outside"), std::string::npos);
  m = Layout();
  m.fields[1].offset = 40;  // inside image's [0, 48)
  EXPECT_NE(Problem(m).find("overlaps two batch fields"), std::string::npos);
  m = Layout();
  m.fields[1].offset = -8;
  EXPECT_NE(Problem(m).find("gives batch field `label` a negative offset"), std::string::npos);
  m = Layout();
  m.fields[0].bytes_per_sample = INT64_MAX / 2;  // the product overflows
  EXPECT_NE(Problem(m).find("outside"), std::string::npos);
  m = Layout();
  m.batch_bytes = 0;
  EXPECT_NE(Problem(m).find("has no batch size in bytes"), std::string::npos);
}

TEST(PlanMemoryLayout, ChecksTheStagedLayoutWithStagingSizes) {
  PlanMemoryDoc m = Layout();
  m.fields[0].staging_bytes_per_sample = 20;  // staged: image [0, 80) runs into label at 64
  EXPECT_NE(Problem(m).find("(GPU-staged layout) overlaps two batch fields"), std::string::npos);
  m.fields[1].staged_offset = 80;
  m.staged_batch_bytes = 112;
  EXPECT_EQ(Problem(m), "");
}

TEST(PlanMemoryLayout, MustMatchTheBatch) {
  EXPECT_NE(Problem(std::nullopt).find("\"memory\" is missing"), std::string::npos);
  json other = kBatch;
  other["size"] = 8;
  EXPECT_NE(Problem(Layout(), other).find("does not match the batch"), std::string::npos);
  other = kBatch;
  other["fields"] = {{"image", "image"}, {"target", "cls"}};
  EXPECT_NE(Problem(Layout(), other).find("does not match the batch"), std::string::npos);
}

TEST(PlanMemoryLayout, CheckBatchLayoutTakesTheCallersSizes) {
  std::vector<PlanFieldExtent> fields = {{"a", 0, 10}, {"b", 40, 10}};
  EXPECT_TRUE(CheckBatchLayout(fields, 4, 80, "w"));
  auto s = CheckBatchLayout(fields, 5, 100, "w");  // a: [0, 50) meets b at 40
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message, "w: plan.json \"memory\" overlaps two batch fields");
  EXPECT_EQ(s.error().hint, "recompile the plan with this Sluice (sluice compile)");
}

}  // namespace
}  // namespace sluice
