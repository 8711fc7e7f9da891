// The loader with order: shard_shuffle over a fake sharded source (an
// image_folder that reports shards of kShard samples): the batches follow the
// sampler's shard_shuffle order, restore mid-shard gives the same batches, and
// a source without shards is a clear error.
#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/sampling/epoch_sampler.h"
#include "runtime/sources/image_folder_source.h"
#include "runtime/sources/source_registry.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;

constexpr uint64_t kShard = 5;

// image_folder's samples, in shards of kShard (the last one shorter).
class FakeShardedSource final : public runtime::Source {
 public:
  explicit FakeShardedSource(std::unique_ptr<runtime::Source> inner) : inner_(std::move(inner)) {}
  size_t size() const override { return inner_->size(); }
  std::string SampleName(size_t i) const override { return inner_->SampleName(i); }
  int64_t label(size_t i) const override { return inner_->label(i); }
  const std::vector<std::string>& class_names() const override { return inner_->class_names(); }
  Result<size_t> Read(size_t i, std::vector<uint8_t>& buffer) const override {
    return inner_->Read(i, buffer);
  }
  std::vector<uint64_t> ShardStarts() const override {
    std::vector<uint64_t> starts;
    for (uint64_t s = 0; s < size(); s += kShard) starts.push_back(s);
    return starts;
  }

 private:
  std::unique_ptr<runtime::Source> inner_;
};

Result<std::unique_ptr<runtime::Source>> OpenFake(const ParamList& params) {
  auto inner = runtime::OpenImageFolderSource(params);
  if (!inner) return std::unexpected(inner.error());
  return std::unique_ptr<runtime::Source>(new FakeShardedSource(std::move(*inner)));
}

class ShardShuffleLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    data_ = std::make_unique<ScopedDir>("shard_loader_data");
    MakeDataset(data_->path(), 26);
    plans_ = std::make_unique<ScopedDir>("shard_loader_plans");
    plan_path_ = EditedPlan(plans_->path(), "shard.plan", [](nlohmann::json& j) {
      j["sampling"]["order"] = "shard_shuffle";
      j["sampling"]["shuffle_buffer"] = 3;
    });
  }
  Result<Loader> Create(const std::string& plan_path, int threads) {
    auto plan = Plan::Load(plan_path, {{"DATA", data_->path().string()}});
    if (!plan) throw std::runtime_error("Plan::Load: " + plan.error().ToString());
    LoaderOptions o;
    o.threads = threads;
    o.rank = 0;
    o.world_size = 1;
    return Loader::Create(*plan, o);
  }
  Loader MakeLoader(int threads) {
    runtime::ScopedSourceOverride fake("image_folder", OpenFake);
    auto loader = Create(plan_path_, threads);
    if (!loader) throw std::runtime_error("Loader::Create: " + loader.error().ToString());
    return std::move(*loader);
  }
  std::unique_ptr<ScopedDir> data_, plans_;
  std::string plan_path_;
};

TEST_F(ShardShuffleLoaderTest, BatchesFollowTheShardShuffleOrder) {
  Loader loader = MakeLoader(2);
  ASSERT_EQ(loader.batches_per_epoch(), 6u);  // floor(26 / 4)
  runtime::SamplerConfig c;
  c.num_samples = 26;
  c.seed = 7;  // loader_test.yaml's
  c.order = runtime::SampleOrder::kShardShuffle;
  c.batch_size = 4;
  c.shard_starts = {0, 5, 10, 15, 20, 25};
  c.shuffle_buffer = 3;
  auto sampler = runtime::EpochSampler::Create(c);
  ASSERT_TRUE(sampler.has_value());
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    auto got = ReadEpoch(loader);
    ASSERT_TRUE(got) << got.error().ToString();
    ASSERT_EQ(got->samples.size(), 6u);
    runtime::EpochOrder order = sampler->Epoch(epoch);
    for (uint64_t b = 0; b < 6; ++b) {
      for (uint64_t k = 0; k < 4; ++k) {
        EXPECT_EQ(got->samples[b][k], order[b * 4 + k]) << "epoch " << epoch << " batch " << b;
      }
    }
  }
}

TEST_F(ShardShuffleLoaderTest, RestoreMidShardYieldsTheSameBatches) {
  Loader original = MakeLoader(2);
  ASSERT_TRUE(ReadEpoch(original, 3));
  LoaderState state = original.State();
  ASSERT_EQ(state.position, 12u);  // inside the third shard read
  auto rest = ReadEpoch(original);
  auto next_epoch = ReadEpoch(original, 2);
  ASSERT_TRUE(rest && next_epoch);
  ASSERT_EQ(rest->batches.size(), 3u);

  Loader restored = MakeLoader(1);
  ASSERT_TRUE(ReadEpoch(restored, 1));
  ASSERT_TRUE(restored.Restore(state));
  auto again = ReadEpoch(restored);
  auto again_next = ReadEpoch(restored, 2);
  ASSERT_TRUE(again && again_next);
  EXPECT_EQ(again->samples, rest->samples);
  EXPECT_TRUE(again->batches == rest->batches);
  EXPECT_EQ(again_next->samples, next_epoch->samples);
  EXPECT_TRUE(again_next->batches == next_epoch->batches);
}

TEST_F(ShardShuffleLoaderTest, SourceWithoutShardsIsAnInvalidSpec) {
  auto loader = Create(plan_path_, 1);  // the real image_folder: no shards
  ASSERT_FALSE(loader.has_value());
  EXPECT_EQ(loader.error().code, ErrorCode::kInvalidSpec);
  EXPECT_NE(loader.error().message.find("shard_shuffle"), std::string::npos);
  EXPECT_NE(loader.error().hint.find("order: shuffle"), std::string::npos);
}

}  // namespace
}  // namespace sluice
