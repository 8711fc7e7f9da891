// max_pixels end to end: plan.json's decode.params.max_pixels reaches the
// decoder the loader makes, and an image over the limit (a decompression
// bomb, by default) is a bad sample whose error names the file and the limit.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;

class PixelLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    work_ = std::make_unique<ScopedDir>("pixel_plans");
    data_ = std::make_unique<ScopedDir>("pixel_data");
    MakeDataset(data_->path(), 8);  // 40..90 pixels per side
  }
  // The test plan with on_error: fail and, when max_pixels > 0, that limit.
  std::string PlanWith(int64_t max_pixels) {
    return EditedPlan(work_->path(), "limit" + std::to_string(max_pixels) + ".plan", [&](json& j) {
      j["output"]["on_error"] = {{"policy", "fail"}, {"max_fraction", 0.5}};
      if (max_pixels > 0) j["decode"]["params"]["max_pixels"] = max_pixels;
    });
  }
  // The first error of one epoch, or "" when the epoch ran through.
  std::string FirstError(const std::string& plan_path) {
    Loader loader = MakeSingleRankLoader(plan_path, data_->path(), 2);
    auto epoch = ReadEpoch(loader);
    return epoch ? "" : epoch.error().ToString();
  }
  std::unique_ptr<ScopedDir> work_, data_;
};

TEST_F(PixelLimitTest, DefaultLimitPassesOrdinaryImages) { EXPECT_EQ(FirstError(PlanWith(0)), ""); }

TEST_F(PixelLimitTest, PlanLimitReachesTheDecoder) {
  // Every image has at least 40 x 40 = 1600 pixels.
  const std::string e = FirstError(PlanWith(1000));
  EXPECT_NE(e.find("max_pixels=1000"), std::string::npos) << e;
  EXPECT_NE(e.find("img_"), std::string::npos) << e;
}

TEST_F(PixelLimitTest, BombIsABadSampleNamingTheFile) {
  // A 64 x 48 JPEG whose SOF claims 30000 x 30000 (900 MP).
  WriteBytes(data_->path() / "class_1/bomb.jpg", WithSof0Size(MakeJpeg(64, 48, 7), 30000, 30000));
  const std::string e = FirstError(PlanWith(0));
  EXPECT_NE(e.find("bomb.jpg"), std::string::npos) << e;
  EXPECT_NE(e.find("30000x30000"), std::string::npos) << e;
  EXPECT_NE(e.find("max_pixels=100000000"), std::string::npos) << e;
}

}  // namespace
}  // namespace sluice
