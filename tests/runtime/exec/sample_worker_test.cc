// The per-sample worker (runtime/exec/sample_worker.h) with the decoder the
// plan names and with stand-in decoders: the worker pushes a region down only
// when the decoder's caps() say it can, the whole-image path gives the same
// bytes, and a decoder's output that does not match the chains is a bad
// sample.
#include "runtime/exec/sample_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "runtime/plan/plan_internal.h"
#include "runtime/sources/source_registry.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using runtime::DecodedRegion;
using runtime::Decoder;
using runtime::DecoderCaps;
using runtime::DecodeRequest;
using runtime::ImageBuffer;
using runtime::ImageHeader;

// Wraps the plan's decoder; reports `caps`, counts the requests that asked for
// a region, and optionally drops the image to one channel.
class StandInDecoder final : public Decoder {
 public:
  StandInDecoder(const Decoder& inner, DecoderCaps caps, bool to_gray = false)
      : inner_(inner), caps_(caps), to_gray_(to_gray) {}
  std::string_view op_name() const override { return inner_.op_name(); }
  DecoderCaps caps() const override { return caps_; }
  Result<ImageHeader> ReadHeader(std::span<const uint8_t> data) const override {
    return inner_.ReadHeader(data);
  }
  Result<DecodedRegion> Decode(std::span<const uint8_t> data, const DecodeRequest& request,
                               ImageBuffer& out) const override {
    if (request.crop) ++crop_requests;
    if (request.min_width > 0 || request.min_height > 0) ++scale_requests;
    auto region = inner_.Decode(data, caps_.region_of_interest ? request : DecodeRequest{}, out);
    if (region && to_gray_) out.Reset(out.width(), out.height(), 1);
    return region;
  }
  mutable std::atomic<int> crop_requests{0}, scale_requests{0};

 private:
  const Decoder& inner_;
  DecoderCaps caps_;
  bool to_gray_;
};

class SampleWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    data_ = std::make_unique<ScopedDir>("sample_worker");
    MakeDataset(data_->path(), 12, 2, 120, 200);
    auto plan = Plan::Load(TestPlan().path, {{"DATA", data_->path().string()}});
    ASSERT_TRUE(plan) << plan.error().ToString();
    plan_ = std::make_unique<Plan>(*plan);
    runtime::LoaderEnvironment env;
    auto config = runtime::ResolveLoaderConfig(*plan_, {}, env);
    ASSERT_TRUE(config) << config.error().ToString();
    config_ = std::move(*config);
    auto source = runtime::OpenSource(config_.source_format, config_.source_params);
    ASSERT_TRUE(source) << source.error().ToString();
    source_ = std::move(*source);
    config_.sampler.num_samples = source_->size();
    auto sampler = runtime::EpochSampler::Create(config_.sampler);
    ASSERT_TRUE(sampler) << sampler.error().ToString();
    sampler_.emplace(std::move(*sampler));
    auto decoder = runtime::MakeDecoder(config_.decode_op, config_.decode_params);
    ASSERT_TRUE(decoder) << decoder.error().ToString();
    decoder_ = std::move(*decoder);
    buffer_ = static_cast<uint8_t*>(std::aligned_alloc(64, config_.buffer_bytes));
  }
  void TearDown() override { std::free(buffer_); }

  // Fills every slot of batch 0 of epoch 0 with `decoder`; returns the
  // buffer's bytes, or the first sample's error.
  Result<std::vector<uint8_t>> FillBatch(const Decoder& decoder) {
    runtime::ReadPool reads(source_, {.timeout_s = config_.read_timeout, .threads = 1});
    runtime::SampleWorker worker(config_, *source_, decoder, reads);
    runtime::EpochOrder order = sampler_->Epoch(0);
    runtime::Scratch scratch;
    runtime::Outcome outcome;
    std::memset(buffer_, 0, config_.buffer_bytes);
    for (int64_t slot = 0; slot < config_.batch_size; ++slot) {
      runtime::Job job{.buffer = 0,
                       .data = buffer_,
                       .slot = slot,
                       .epoch = 0,
                       .position = static_cast<uint64_t>(slot)};
      outcome.Reset();
      worker.Process(job, order, scratch, outcome);
      if (outcome.fatal) return std::unexpected(*outcome.fatal);
      if (outcome.error) return std::unexpected(*outcome.error);
      if (outcome.bad_count > 0) return std::unexpected(*outcome.bad_error[0]);
    }
    return std::vector<uint8_t>(buffer_, buffer_ + config_.buffer_bytes);
  }

  std::unique_ptr<ScopedDir> data_;
  std::unique_ptr<Plan> plan_;
  runtime::LoaderConfig config_;
  std::shared_ptr<const runtime::Source> source_;
  std::optional<runtime::EpochSampler> sampler_;
  std::unique_ptr<Decoder> decoder_;
  uint8_t* buffer_ = nullptr;
};

TEST_F(SampleWorkerTest, PushesARegionOnlyWhenTheDecoderCan) {
  ASSERT_TRUE(config_.pushdown.region);
  StandInDecoder roi(*decoder_, {.region_of_interest = true, .dct_scaling = true});
  auto pushed = FillBatch(roi);
  ASSERT_TRUE(pushed) << pushed.error().ToString();
  EXPECT_EQ(roi.crop_requests.load(), config_.batch_size);
  EXPECT_EQ(roi.scale_requests.load(), 0);  // dct_scaling is off in the config

  StandInDecoder whole(*decoder_, DecoderCaps{});
  auto unpushed = FillBatch(whole);
  ASSERT_TRUE(unpushed) << unpushed.error().ToString();
  EXPECT_EQ(whole.crop_requests.load(), 0);
  // Region-of-interest decode is bit-identical to the whole-image path.
  EXPECT_TRUE(*pushed == *unpushed);

  auto plain = FillBatch(*decoder_);
  ASSERT_TRUE(plain) << plain.error().ToString();
  EXPECT_TRUE(*plain == *pushed);
}

TEST_F(SampleWorkerTest, DctScalingOnlyWithADecoderThatCanScale) {
  config_.pushdown.dct_scaling = true;
  StandInDecoder roi_only(*decoder_, {.region_of_interest = true, .dct_scaling = false});
  ASSERT_TRUE(FillBatch(roi_only));
  EXPECT_EQ(roi_only.crop_requests.load(), config_.batch_size);
  EXPECT_EQ(roi_only.scale_requests.load(), 0);
}

TEST_F(SampleWorkerTest, WrongChannelCountIsABadSampleNamingThePath) {
  config_.policy = runtime::ErrorPolicy::kFail;
  StandInDecoder gray(*decoder_, DecoderCaps{}, /*to_gray=*/true);
  auto filled = FillBatch(gray);
  ASSERT_FALSE(filled);
  EXPECT_EQ(filled.error().code, ErrorCode::kCorruptData);
  EXPECT_NE(filled.error().message.find("decoded to 1 channels; the plan's chains read 3"),
            std::string::npos)
      << filled.error().message;
  EXPECT_NE(filled.error().message.find(data_->path().string()), std::string::npos)
      << filled.error().message;
}

// Decodes as `inner`, then reports an image of `width` x `height` (3 channels)
// whose pixels are never written (the buffer stays untouched virtual memory).
class HugeImageDecoder final : public Decoder {
 public:
  HugeImageDecoder(const Decoder& inner, int width, int height)
      : inner_(inner), width_(width), height_(height) {}
  std::string_view op_name() const override { return inner_.op_name(); }
  DecoderCaps caps() const override { return {}; }
  Result<ImageHeader> ReadHeader(std::span<const uint8_t> data) const override {
    return inner_.ReadHeader(data);
  }
  Result<DecodedRegion> Decode(std::span<const uint8_t> data, const DecodeRequest& request,
                               ImageBuffer& out) const override {
    auto region = inner_.Decode(data, DecodeRequest{}, out);
    if (!region) return region;
    out.Reset(width_, height_, 3);
    region->decoded = {0, 0, width_, height_};
    return region;
  }

 private:
  const Decoder& inner_;
  int width_, height_;
};

// An image too large for the fused kernel (over Halide's 2 GiB buffer limit;
// possible with a raised max_pixels) is a bad sample under the error policy,
// not a fatal kernel failure that stops the loader.
TEST_F(SampleWorkerTest, ImageOverTheKernelLimitIsABadSample) {
  config_.policy = runtime::ErrorPolicy::kFail;
  // The decoder's buffer is address space only (never written), but a machine
  // that refuses to reserve it cannot run this test.
  if (!std::unique_ptr<uint8_t[]>(new (std::nothrow) uint8_t[size_t{27000} * 27000 * 3])) {
    GTEST_SKIP() << "cannot reserve 2.19 GB of address space";
  }
  HugeImageDecoder huge(*decoder_, 27000, 27000);  // 2.19e9 bytes of RGB
  runtime::ReadPool reads(source_, {.timeout_s = config_.read_timeout, .threads = 1});
  runtime::SampleWorker worker(config_, *source_, huge, reads);
  runtime::EpochOrder order = sampler_->Epoch(0);
  runtime::Scratch scratch;
  runtime::Outcome outcome;
  worker.Process({.buffer = 0, .data = buffer_, .slot = 0, .epoch = 0, .position = 0}, order,
                 scratch, outcome);
  EXPECT_FALSE(outcome.fatal) << outcome.fatal->ToString();
  ASSERT_TRUE(outcome.error);
  EXPECT_EQ(outcome.error->code, ErrorCode::kCorruptData);
  EXPECT_NE(outcome.error->message.find("input limit"), std::string::npos)
      << outcome.error->message;
  EXPECT_EQ(outcome.bad_count, 1);
}

}  // namespace
}  // namespace sluice
