#include "ops/random.h"

#include <gtest/gtest.h>

#include <set>

namespace sluice {
namespace {

// Known-answer vectors of Philox4x32-10 from Random123 (kat_vectors).
TEST(PhiloxTest, KnownAnswerVectors) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(SampleRng::Philox({0, 0, 0, 0}, {0, 0}),
            (A4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(SampleRng::Philox({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                              {0xffffffffu, 0xffffffffu}),
            (A4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(SampleRng::Philox({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                              {0xa4093822u, 0x299f31d0u}),
            (A4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(SampleRngTest, SameKeySameStream) {
  SampleRng a(7, 1, 42, 3), b(7, 1, 42, 3);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(a.NextU32(), b.NextU32());
}

TEST(SampleRngTest, EveryKeyPartMatters) {
  const uint32_t base = SampleRng(7, 1, 42, 3).NextU32();
  EXPECT_NE(SampleRng(8, 1, 42, 3).NextU32(), base);
  EXPECT_NE(SampleRng(7, 2, 42, 3).NextU32(), base);
  EXPECT_NE(SampleRng(7, 1, 43, 3).NextU32(), base);
  EXPECT_NE(SampleRng(7, 1, 42, 4).NextU32(), base);
  EXPECT_NE(SampleRng(7, 1, 42 + (uint64_t{1} << 32), 3).NextU32(), base);
}

TEST(SampleRngTest, RangesHold) {
  SampleRng rng(0, 0, 0, 0);
  std::set<int64_t> seen;
  double sum = 0;
  for (int i = 0; i < 4000; ++i) {
    const double u = rng.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    const int64_t k = rng.UniformInt(-2, 2);
    ASSERT_GE(k, -2);
    ASSERT_LE(k, 2);
    seen.insert(k);
    const double v = rng.Uniform(3.0, 5.0);
    ASSERT_GE(v, 3.0);
    ASSERT_LT(v, 5.0);
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_NEAR(sum / 4000, 0.5, 0.03);
  EXPECT_FALSE(rng.Bernoulli(0.0));
  EXPECT_TRUE(rng.Bernoulli(1.0));
  EXPECT_EQ(rng.UniformInt(9, 9), 9);
}

}  // namespace
}  // namespace sluice
