// The loader over a tar_shards source, end to end: the test plan with its
// source switched to `tar_shards` (as a spec's `source: {format: tar_shards,
// path: ...}` compiles) delivers exactly the batches of the same images read
// as an image_folder, in the same sample order; a shard with corrupt data and
// a sample missing its label are bad samples under the skip policy; a member
// over the decode op's max_pixels is a bad sample named SHARD:KEY.
#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/sources/image_folder_source.h"
#include "runtime/sources/tar/tar_format.h"
#include "tests/runtime/loader/loader_test_util.h"

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
    auto src = runtime::ImageFolderSource::Open(folder_->path().string());
    ASSERT_TRUE(src.has_value());
    std::vector<uint8_t> bytes;
    for (int k = 0; k < 3; ++k) {
      auto w = runtime::tar::Writer::Create(
          (shards_->path() / ("shard-00000" + std::to_string(k) + ".tar")).string());
      ASSERT_TRUE(w.has_value());
      for (size_t i = 8 * static_cast<size_t>(k); i < 8 * static_cast<size_t>(k) + 8; ++i) {
        auto n = (*src)->Read(i, bytes);
        ASSERT_TRUE(n.has_value());
        char key[16];
        std::snprintf(key, sizeof(key), "%06zu", i);
        const std::string label = std::to_string((*src)->label(i));
        ASSERT_TRUE(w->Add(std::string(key) + ".jpg", {bytes.data(), *n}).has_value());
        ASSERT_TRUE(w->Add(std::string(key) + ".cls",
                           {reinterpret_cast<const uint8_t*>(label.data()), label.size()})
                        .has_value());
      }
      ASSERT_TRUE(w->Finish().has_value());
    }
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
      j["source"]["format"] = "tar_shards";
      j["source"]["params"] = {
          {"path", path}, {"image", "jpg"}, {"label", "cls"}, {"index", ""}, {"cache_dir", ""}};
      j["output"]["on_error"] = {{"policy", policy}, {"max_fraction", 0.5}};
    });
  }
  Loader Make(const std::string& plan_path, const fs::path& data, int threads) {
    auto plan = Plan::Load(plan_path, {{"DATA", data.string()}});
    if (!plan) throw std::runtime_error(plan.error().ToString());
    LoaderOptions o;
    o.threads = threads;
    o.rank = 0;
    o.world_size = 1;
    auto loader = Loader::Create(*plan, o);
    if (!loader) throw std::runtime_error(loader.error().ToString());
    return std::move(*loader);
  }
  std::unique_ptr<ScopedDir> work_, folder_, shards_;
};

TEST_F(TarShardsLoaderTest, SameBatchesAsTheImageFolder) {
  Loader folder = Make(TestPlan().path, folder_->path(), 2);
  Loader shards =
      Make(TarPlan("tar.plan", "${DATA}/shard-{000000..000002}.tar", "fail"), shards_->path(), 2);
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

  Loader loader = Make(TarPlan("skip.plan", "${DATA}", "skip", true), shards_->path(), 2);
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

  Loader failing = Make(TarPlan("fail.plan", "${DATA}", "fail", true), shards_->path(), 1);
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
  std::vector<uint8_t> bomb = MakeJpeg(64, 48, 7);
  for (size_t i = 0; i + 8 < bomb.size(); ++i) {
    if (bomb[i] == 0xFF && bomb[i + 1] == 0xC0) {
      bomb[i + 5] = 30000 >> 8, bomb[i + 6] = 30000 & 255;
      bomb[i + 7] = 30000 >> 8, bomb[i + 8] = 30000 & 255;
      break;
    }
  }
  auto w = runtime::tar::Writer::Create((shards_->path() / "shard-000003.tar").string());
  ASSERT_TRUE(w.has_value());
  const uint8_t one = '1';
  ASSERT_TRUE(w->Add("bomb.jpg", bomb).has_value());
  ASSERT_TRUE(w->Add("bomb.cls", {&one, 1}).has_value());
  ASSERT_TRUE(w->Finish().has_value());

  Loader failing = Make(TarPlan("bomb.plan", "${DATA}", "fail", true), shards_->path(), 2);
  auto failed = ReadEpoch(failing);
  ASSERT_FALSE(failed.has_value());
  const std::string& e = failed.error().message;
  EXPECT_NE(e.find("shard-000003.tar:bomb"), std::string::npos) << e;
  EXPECT_NE(e.find("30000x30000"), std::string::npos) << e;
  EXPECT_NE(e.find("max_pixels=100000000"), std::string::npos) << e;

  Loader skipping = Make(TarPlan("bomb_skip.plan", "${DATA}", "skip", true), shards_->path(), 2);
  auto epoch = ReadEpoch(skipping);
  ASSERT_TRUE(epoch.has_value()) << epoch.error().ToString();
  EXPECT_EQ(skipping.Stats().bad_samples, 1u);
}

}  // namespace
}  // namespace sluice
