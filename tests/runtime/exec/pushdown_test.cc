// Decode pushdown in the loader: region-of-interest decode at full scale is
// bit-identical to decoding the whole image (the unpushed path: whole decode,
// ComputeSampleArgs on the full size, the same kernel); DCT-scaled decode
// (LoaderOptions::dct_scaling) is not, and this test measures by how much.
//
// Measured on this test's images (200-320 px photo-like JPEGs, 32x32 outputs,
// normalized float32; one uint8 level = 0.0174): see the printed
// "dct_scaling deviation" line. The deviation is what motivates dct_scaling
// being off by default.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>

#include "ops/fusion/sample_args.h"
#include "runtime/decode/jpeg_decoder.h"
#include "runtime/kernels/kernel_library.h"
#include "runtime/plan/plan_internal.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;

class PushdownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    data_ = std::make_unique<ScopedDir>("pushdown_data");
    MakeDataset(data_->path(), 24, 2, 200, 320);
    for (const auto& e : fs::recursive_directory_iterator(data_->path())) {
      if (e.is_regular_file()) files_.push_back(e.path().string());
    }
    std::sort(files_.begin(), files_.end());
    auto plan = Plan::Load(TestPlan().path, {{"DATA", data_->path().string()}});
    ASSERT_TRUE(plan) << plan.error().ToString();
    plan_ = std::make_unique<Plan>(*plan);
  }
  // The unpushed output of one sample: whole-image decode + full-size args.
  std::vector<float> Unpushed(uint64_t index, uint64_t epoch) {
    std::ifstream in(files_[index], std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    runtime::ImageBuffer image;
    auto region = runtime::DecodeJpeg(bytes, {}, image);
    EXPECT_TRUE(region);
    auto args = ComputeSampleArgs(plan_->chains()[0], image.height(), image.width(), 7, epoch,
                                  index);
    EXPECT_TRUE(args);
    std::vector<float> out(3 * 32 * 32);
    runtime::ImageView view{image.data(), image.height(), image.width(), 3,
                            static_cast<int64_t>(image.stride())};
    EXPECT_TRUE(plan_->cpu_kernel(0).Run(view, *args, out.data()));
    return out;
  }
  std::unique_ptr<ScopedDir> data_;
  std::vector<std::string> files_;
  std::unique_ptr<Plan> plan_;
};

TEST_F(PushdownTest, RegionDecodeIsBitIdenticalToWholeDecode) {
  LoaderOptions o;
  o.threads = 2;
  o.rank = 0;
  o.world_size = 1;
  auto loader = Loader::Create(*plan_, o);
  ASSERT_TRUE(loader);
  int compared = 0;
  for (int b = 0; b < 6; ++b) {
    auto next = loader->Next();
    ASSERT_TRUE(next && next->has_value());
    const Batch& batch = **next;
    const float* got = batch.field("image")->as<float>();
    for (int i = 0; i < 4; ++i) {
      std::vector<float> want = Unpushed(batch.sample_indices()[i], 0);
      EXPECT_EQ(std::memcmp(got + i * 3072, want.data(), want.size() * sizeof(float)), 0)
          << "sample " << batch.sample_indices()[i];
      ++compared;
    }
  }
  EXPECT_EQ(compared, 24);
}

TEST_F(PushdownTest, DctScalingDeviationIsMeasured) {
  LoaderOptions o;
  o.threads = 2;
  o.rank = 0;
  o.world_size = 1;
  o.dct_scaling = true;
  auto loader = Loader::Create(*plan_, o);
  ASSERT_TRUE(loader);
  double sum = 0, max_diff = 0;
  int64_t count = 0, differing_samples = 0;
  for (int b = 0; b < 6; ++b) {
    auto next = loader->Next();
    ASSERT_TRUE(next && next->has_value());
    const Batch& batch = **next;
    const float* got = batch.field("image")->as<float>();
    for (int i = 0; i < 4; ++i) {
      std::vector<float> want = Unpushed(batch.sample_indices()[i], 0);
      double sample_max = 0;
      for (size_t k = 0; k < want.size(); ++k) {
        double d = std::abs(static_cast<double>(got[i * 3072 + k]) - want[k]);
        sum += d;
        sample_max = std::max(sample_max, d);
        ++count;
      }
      max_diff = std::max(max_diff, sample_max);
      if (sample_max > 0) ++differing_samples;
    }
  }
  const double mean = sum / static_cast<double>(count);
  std::cout << "dct_scaling deviation: mean abs " << mean << " (" << mean / 0.0174
            << " uint8 levels), max abs " << max_diff << " (" << max_diff / 0.0174
            << " levels), samples differing " << differing_samples << "/24\n";
  EXPECT_GT(differing_samples, 0) << "no sample took the DCT-scaled path";
  // Bounds: the scaled path must still be the same picture (a broken mapping
  // of the crop would give errors of the order of the signal, ~1.0).
  EXPECT_LT(mean, 0.25);
}

}  // namespace
}  // namespace sluice
