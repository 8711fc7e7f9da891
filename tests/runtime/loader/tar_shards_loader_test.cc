// The loader over a tar_shards source, end to end: the test plan with its
// source switched to `tar_shards` (as a spec's `source: {format: tar_shards,
// path: ...}` compiles) delivers exactly the batches of the same images read
// as an image_folder, in the same sample order; a shard with corrupt data and
// a sample missing its label are bad samples under the skip policy; a member
// over the decode op's max_pixels is a bad sample named SHARD:KEY.
#include <gtest/gtest.h>

#include "runtime/sources/tar/tar_format.h"
#include "tests/runtime/loader/loader_test_util.h"
#include "tests/runtime/loader/shard_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;

class TarShardsLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    work_ = std::make_unique<ScopedDir>("tar_plans");
    folder_ = std::make_unique<ScopedDir>("tar_folder");
    shards_ = std::make_unique<ScopedDir>("tar_shards");
    MakeDataset(folder_->path(), 24);
    // The folder's samples in its order, three shards of eight, keys %06d.
    ASSERT_NO_FATAL_FAILURE(WriteTarShards(folder_->path(), shards_->path(), 3, 8));
  }
  // The test plan reading tar_shards at `path`; `sequential`: in order, the
  // last batch padded (every sample is visited).
  std::string TarPlan(const std::string& name, const std::string& path, const std::string& policy,
                      bool sequential = false) {
    return EditedPlan(work_->path(), name, [&](json& j) {
      if (sequential) {
        j["sampling"]["order"] = "sequential";
        j["sampling"]["remainder"] = "pad";
      }
      UseTarShardsSource(j, path);
      j["output"]["on_error"] = {{"policy", policy}, {"max_fraction", 0.5}};
    });
  }
  std::unique_ptr<ScopedDir> work_, folder_, shards_;
};

TEST_F(TarShardsLoaderTest, SameBatchesAsTheImageFolder) {
  Loader folder = MakeSingleRankLoader(TestPlan().path, folder_->path(), 2);
  Loader shards = MakeSingleRankLoader(
      TarPlan("tar.plan", "${DATA}/shard-{000000..000002}.tar", "fail"), shards_->path(), 2);
  auto a = ReadEpoch(folder);
  auto b = ReadEpoch(shards);
  ASSERT_TRUE(a.has_value()) << a.error().ToString();
  ASSERT_TRUE(b.has_value()) << b.error().ToString();
  EXPECT_EQ(b->batches.size(), 6u);
  EXPECT_EQ(a->samples, b->samples);
  EXPECT_TRUE(a->batches == b->batches);
  EXPECT_EQ(shards.Stats().bad_samples, 0u);
}

TEST_F(TarShardsLoaderTest, CorruptShardAndMissingFieldAreSkippedBadSamples) {
  // A fourth shard: one good sample, one without its label, then a truncated member.
  std::vector<uint8_t> jpeg = MakeJpeg(48, 40, 77);
  auto w = runtime::tar::Writer::Create((shards_->path() / "shard-000003.tar").string());
  ASSERT_TRUE(w.has_value());
  const uint8_t zero = '0';
  ASSERT_TRUE(w->Add("good.jpg", jpeg).has_value());
  ASSERT_TRUE(w->Add("good.cls", {&zero, 1}).has_value());
  ASSERT_TRUE(w->Add("nolabel.jpg", jpeg).has_value());
  auto cut = w->Add("cut.jpg", jpeg);
  ASSERT_TRUE(cut.has_value());
  ASSERT_TRUE(w->Finish().has_value());
  fs::resize_file(shards_->path() / "shard-000003.tar", *cut + jpeg.size() / 2);

  Loader loader =
      MakeSingleRankLoader(TarPlan("skip.plan", "${DATA}", "skip", true), shards_->path(), 2);
  auto epoch = ReadEpoch(loader);
  ASSERT_TRUE(epoch.has_value()) << epoch.error().ToString();
  // 27 samples in the source (25 good), batch 4, the last batch padded: 7 batches.
  EXPECT_EQ(epoch->batches.size(), 7u);
  LoaderStats stats = loader.Stats();
  EXPECT_GE(stats.bad_samples, 2u);
  EXPECT_EQ(stats.skipped, stats.bad_samples);
  bool saw_label = false, saw_truncated = false;
  for (const BadSample& bad : stats.last_bad) {
    EXPECT_NE(bad.path.find("shard-000003.tar"), std::string::npos) << bad.path;
    saw_label |= bad.reason.find("no label member (cls)") != std::string::npos;
    saw_truncated |= bad.reason.find("(truncated)") != std::string::npos;
  }
  EXPECT_TRUE(saw_label);
  EXPECT_TRUE(saw_truncated);

  Loader failing =
      MakeSingleRankLoader(TarPlan("fail.plan", "${DATA}", "fail", true), shards_->path(), 1);
  auto failed = ReadEpoch(failing);
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(failed.error().message.find("shard-000003.tar"), std::string::npos)
      << failed.error().message;
}

TEST_F(TarShardsLoaderTest, DecompressionBombInAShardIsABadSampleNamingIt) {
  // A tar member goes through the same decoders as a file, so max_pixels holds:
  // a 64 x 48 JPEG whose SOF claims 30000 x 30000 (900 MP), as sample "bomb"
  // of a fourth shard, is refused from its header under the default limit.
  const std::vector<uint8_t> bomb = WithSof0Size(MakeJpeg(64, 48, 7), 30000, 30000);
  auto w = runtime::tar::Writer::Create((shards_->path() / "shard-000003.tar").string());
  ASSERT_TRUE(w.has_value());
  const uint8_t one = '1';
  ASSERT_TRUE(w->Add("bomb.jpg", bomb).has_value());
  ASSERT_TRUE(w->Add("bomb.cls", {&one, 1}).has_value());
  ASSERT_TRUE(w->Finish().has_value());

  Loader failing =
      MakeSingleRankLoader(TarPlan("bomb.plan", "${DATA}", "fail", true), shards_->path(), 2);
  auto failed = ReadEpoch(failing);
  ASSERT_FALSE(failed.has_value());
  const std::string& e = failed.error().message;
  EXPECT_NE(e.find("shard-000003.tar:bomb"), std::string::npos) << e;
  EXPECT_NE(e.find("30000x30000"), std::string::npos) << e;
  EXPECT_NE(e.find("max_pixels=100000000"), std::string::npos) << e;

  Loader skipping =
      MakeSingleRankLoader(TarPlan("bomb_skip.plan", "${DATA}", "skip", true), shards_->path(), 2);
  auto epoch = ReadEpoch(skipping);
  ASSERT_TRUE(epoch.has_value()) << epoch.error().ToString();
  EXPECT_EQ(skipping.Stats().bad_samples, 1u);
}

}  // namespace
}  // namespace sluice
