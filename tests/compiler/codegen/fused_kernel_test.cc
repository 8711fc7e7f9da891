// Fused kernels against the reference chain (the registry's reference
// implementations run step by step with the same random keys).
//
// Tolerance rule (also in docs/kernels.md):
//  * uint8 outputs: |kernel - reference| <= 1 (float32 vs double accumulation
//    may put a value on the other side of a .5 rounding boundary).
//  * float outputs: |a - b| <= 1e-3 * max(1, |b|), except that an element may
//    instead differ by one uint8 level propagated through the pointwise tail
//    (the reference rounds the resampled image to uint8 before normalize; a
//    1-level difference there becomes 1 / scale / std after normalize), plus
//    the 1e-3 relative term. Such one-level elements must be rare: at most 1%
//    of the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ops/fusion/sample_args.h"
#include "tests/compiler/codegen/kernel_fixture.h"

namespace sluice {
namespace {

using testing::LoadElement;
using testing::SharedKernels;

RefTensor RandomImage(int64_t h, int64_t w, int64_t c, std::mt19937& rng, bool gray_as_rgb) {
  RefTensor t = RefTensor::Zeros(DType::kUInt8, Layout::kHWC, {h, w, c});
  std::uniform_int_distribution<int> d(0, 255);
  // Smooth-ish content with noise, so resampling is exercised on real gradients.
  const int fx = d(rng) % 7 + 1, fy = d(rng) % 5 + 1;
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const int g = d(rng);
      for (int64_t ch = 0; ch < c; ++ch) {
        const int base = static_cast<int>((x * fx + y * fy + ch * 50) % 256);
        t.at(y, x, ch) = static_cast<float>(gray_as_rgb ? g : (base + d(rng) % 64) % 256);
      }
    }
  }
  return t;
}

// Uint8 scale/std of the chain's normalize (for the one-level allowance).
double OneLevel(const FusedChain& chain) {
  double level = 0.0;
  for (const ChainStep& s : chain.steps) {
    if (s.op->name != "normalize") continue;
    double min_std = 1e9;
    for (double v : s.params.at("std").AsFloatList()) min_std = std::min(min_std, v);
    level = 1.0 / s.params.at("scale").AsFloat() / min_std;
  }
  return level;
}

struct Stats {
  int64_t n = 0, level_hits = 0;
  double max_abs = 0;
};

void CompareOne(const std::string& name, int64_t h, int64_t w, uint64_t seed, uint64_t sample,
                bool gray_as_rgb, Stats& stats) {
  const auto& k = SharedKernels();
  ASSERT_TRUE(k.artifact) << k.artifact.error().ToString();
  ASSERT_TRUE(k.library) << k.library.error().ToString();
  const FusedChain& chain = k.chains.at(name);
  auto kernel = k.library->CpuKernel(chain);
  ASSERT_TRUE(kernel) << kernel.error().ToString();
  std::mt19937 rng(static_cast<uint32_t>(seed * 7919 + sample * 31 + h * 13 + w));
  const int64_t c = chain.input.dims[2];
  RefTensor img = RandomImage(h, w, c, rng, gray_as_rgb);
  std::vector<uint8_t> packed(img.data.size());
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<uint8_t>(img.data[i]);

  const uint64_t epoch = 3;
  auto args = ComputeSampleArgs(chain, h, w, seed, epoch, sample);
  ASSERT_TRUE(args) << args.error().ToString();
  auto ref = ReferenceChain(chain, img, seed, epoch, sample);
  ASSERT_TRUE(ref) << ref.error().ToString();
  ASSERT_EQ(ref->type, chain.output) << name;

  const size_t n = static_cast<size_t>(ref->num_elements());
  std::vector<uint8_t> out(n * DTypeSize(chain.output.dtype), 0xAB);
  runtime::ImageView view{packed.data(), h, w, c, w * c};
  auto st = kernel->Run(view, *args, out.data());
  ASSERT_TRUE(st) << st.error().ToString();

  const double level = OneLevel(chain);
  const bool is_float = IsFloat(chain.output.dtype);
  int64_t bad = 0;
  std::string first_bad;
  for (size_t i = 0; i < n; ++i) {
    const double a = LoadElement(out, chain.output.dtype, i), b = ref->data[i];
    const double d = std::fabs(a - b);
    stats.max_abs = std::max(stats.max_abs, d);
    bool ok;
    if (!is_float) {
      ok = d <= 1.0;
    } else {
      const double rel = 1e-3 * std::max(1.0, std::fabs(b));
      ok = d <= rel;
      if (!ok && level > 0 && d <= level + rel) {
        ok = true;
        ++stats.level_hits;
      }
    }
    if (!ok && bad++ == 0) {
      first_bad = "element " + std::to_string(i) + ": kernel " + std::to_string(a) +
                  " reference " + std::to_string(b);
    }
  }
  stats.n += static_cast<int64_t>(n);
  EXPECT_EQ(bad, 0) << name << " " << h << "x" << w << " seed " << seed << " sample " << sample
                    << ": " << bad << " of " << n << " elements differ; first " << first_bad;
}

void Sweep(const std::string& name, int count, int64_t max_side, bool include_tiny = true) {
  std::mt19937 rng(std::hash<std::string>{}(name));
  Stats stats;
  std::vector<std::pair<int64_t, int64_t>> sizes;
  if (include_tiny) sizes = {{1, 1}, {1, 7}, {5, 2}, {3, 3}};
  std::uniform_int_distribution<int64_t> side(1, max_side);
  while (static_cast<int>(sizes.size()) < count) sizes.push_back({side(rng), side(rng)});
  for (size_t i = 0; i < sizes.size(); ++i) {
    CompareOne(name, sizes[i].first, sizes[i].second, 11 + i, 1000 + i * 17, i % 5 == 4, stats);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_LE(stats.level_hits, stats.n / 100)
      << name << ": too many one-uint8-level differences (" << stats.level_hits << " of "
      << stats.n << ")";
  ::testing::Test::RecordProperty("max_abs_diff", std::to_string(stats.max_abs));
}

TEST(FusedKernelTest, LibraryBuilds) {
  const auto& k = SharedKernels();
  ASSERT_TRUE(k.artifact) << k.artifact.error().ToString();
  EXPECT_EQ(k.artifact->kernels.size(), k.chains.size());
  EXPECT_TRUE(std::filesystem::exists(k.artifact->library));
  EXPECT_EQ(k.artifact->arg_names.size(),
            static_cast<size_t>(kKernelIntArgs + kKernelFloatArgs));
}

TEST(FusedKernelTest, ImagenetTrain) { Sweep("train", 14, 700); }
TEST(FusedKernelTest, ImagenetEval) { Sweep("eval", 10, 600); }
TEST(FusedKernelTest, CropFlipIsExactCopy) { Sweep("crop_flip", 12, 80); }
TEST(FusedKernelTest, PadCenterCrop) { Sweep("pad_center", 12, 90); }
TEST(FusedKernelTest, FlipPadResizeCropFlip) { Sweep("flip_resize_crop", 12, 120); }
TEST(FusedKernelTest, Bicubic) { Sweep("bicubic", 10, 200); }
TEST(FusedKernelTest, Area) { Sweep("area", 10, 200); }
TEST(FusedKernelTest, NearestNoAntialias) { Sweep("nearest_noaa", 10, 150); }
TEST(FusedKernelTest, BilinearNoAntialias) { Sweep("bilinear_noaa", 10, 150); }
TEST(FusedKernelTest, ColorJitter) { Sweep("jitter", 10, 120); }
// Two random steps of the same op in one chain draw independently (the
// reference keys each by its own op id); the kernel must match that.
TEST(FusedKernelTest, TwoColorJitterStepsDrawIndependently) { Sweep("jitter2", 10, 90); }
TEST(FusedKernelTest, GrayscaleBFloat16) { Sweep("gray_bf16", 10, 150); }
TEST(FusedKernelTest, OneChannelInput) { Sweep("gray1_in", 10, 100); }

TEST(FusedKernelTest, LargeImages) {
  Stats stats;
  CompareOne("train", 3000, 4000, 5, 77, false, stats);
  CompareOne("eval", 4000, 3000, 6, 78, false, stats);
  CompareOne("eval", 2999, 1001, 7, 79, true, stats);
}

TEST(FusedKernelTest, CopyChainIsBitExact) {
  // Integer crop/flip/pad paths involve no arithmetic: the kernel must be exact.
  const auto& k = SharedKernels();
  ASSERT_TRUE(k.library);
  for (const char* name : {"crop_flip", "pad_center"}) {
    const FusedChain& chain = k.chains.at(name);
    auto kernel = k.library->CpuKernel(chain);
    ASSERT_TRUE(kernel);
    std::mt19937 rng(5);
    RefTensor img = RandomImage(61, 77, 3, rng, false);
    std::vector<uint8_t> packed(img.data.begin(), img.data.end());
    for (uint64_t s = 0; s < 8; ++s) {
      auto args = ComputeSampleArgs(chain, 61, 77, 1, 0, s);
      ASSERT_TRUE(args);
      auto ref = ReferenceChain(chain, img, 1, 0, s);
      ASSERT_TRUE(ref);
      std::vector<uint8_t> out(ref->num_elements());
      ASSERT_TRUE(kernel->Run({packed.data(), 61, 77, 3, 77 * 3}, *args, out.data()));
      for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], ref->data[i]) << name << " " << i;
    }
  }
}

TEST(FusedKernelTest, ComparisonDiscriminates) {
  // The same image with another sample's random draws must not match: the
  // comparison above is not vacuous.
  const auto& k = SharedKernels();
  ASSERT_TRUE(k.library);
  const FusedChain& chain = k.chains.at("train");
  auto kernel = k.library->CpuKernel(chain);
  ASSERT_TRUE(kernel);
  std::mt19937 rng(3);
  RefTensor img = RandomImage(120, 160, 3, rng, false);
  std::vector<uint8_t> packed(img.data.begin(), img.data.end());
  auto args = ComputeSampleArgs(chain, 120, 160, 1, 0, 1);
  auto ref = ReferenceChain(chain, img, 1, 0, 2);
  ASSERT_TRUE(args && ref);
  std::vector<uint8_t> out(ref->num_elements() * 2);
  ASSERT_TRUE(kernel->Run({packed.data(), 120, 160, 3, 480}, *args, out.data()));
  int64_t differ = 0;
  for (size_t i = 0; i < static_cast<size_t>(ref->num_elements()); ++i) {
    differ += std::fabs(LoadElement(out, DType::kFloat16, i) - ref->data[i]) > 0.05;
  }
  EXPECT_GT(differ, ref->num_elements() / 10);
}

TEST(FusedKernelTest, RowStrideIsHonoured) {
  const auto& k = SharedKernels();
  ASSERT_TRUE(k.library);
  const FusedChain& chain = k.chains.at("eval");
  auto kernel = k.library->CpuKernel(chain);
  ASSERT_TRUE(kernel);
  std::mt19937 rng(9);
  RefTensor img = RandomImage(100, 90, 3, rng, false);
  const int64_t stride = 90 * 3 + 13;
  std::vector<uint8_t> padded(100 * stride, 7);
  for (int64_t y = 0; y < 100; ++y) {
    for (int64_t i = 0; i < 270; ++i) padded[y * stride + i] = static_cast<uint8_t>(img.data[y * 270 + i]);
  }
  std::vector<uint8_t> dense(img.data.begin(), img.data.end());
  auto args = ComputeSampleArgs(chain, 100, 90, 0, 0, 0);
  ASSERT_TRUE(args);
  const size_t bytes = chain.output.dims[0] * chain.output.dims[1] * chain.output.dims[2] * 4;
  std::vector<uint8_t> a(bytes), b(bytes);
  ASSERT_TRUE(kernel->Run({padded.data(), 100, 90, 3, stride}, *args, a.data()));
  ASSERT_TRUE(kernel->Run({dense.data(), 100, 90, 3, 270}, *args, b.data()));
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace sluice
