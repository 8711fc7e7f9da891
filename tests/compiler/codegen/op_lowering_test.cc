// The registry walk: every fusable op has what the compiler needs from its
// entry (a composition hook or a Halide lowering, draw declarations for random
// ops), a fusable op without a lowering is a compile error, and two steps of
// one random op draw independently.
#include <gtest/gtest.h>

#include "compiler/codegen/chain_pipeline.h"
#include "compiler/codegen/lower/lowering.h"
#include "ops/fusion/sample_args.h"
#include "ops/random.h"
#include "tests/compiler/codegen/kernel_fixture.h"

namespace sluice {
namespace {

using testing::F;
using testing::Is;
using testing::MakeChain;

TEST(OpRegistryWalk, EveryFusableOpHasItsHookOrLowering) {
  int geometry = 0, pointwise = 0;
  for (const OpDef* op : AllOps()) {
    SCOPED_TRACE(op->name);
    // The fusable classes have a fusion role, the others none.
    const bool fusable_class =
        op->op_class == OpClass::kResample || op->op_class == OpClass::kPointwise;
    EXPECT_EQ(fusable_class, op->fusion != FusionRole::kNone);
    switch (op->fusion) {
      case FusionRole::kGeometry:
        ++geometry;
        EXPECT_TRUE(op->geometry.compose) << "geometry op without a composition hook";
        EXPECT_EQ(op->draw_slots, 0) << "a geometry op draws in its compose hook";
        EXPECT_FALSE(op->gpu_batch);
        EXPECT_GT(op->cost.resample_px, 0) << "no resample cost term";
        break;
      case FusionRole::kPointwise:
        ++pointwise;
        EXPECT_NE(codegen_internal::FindLowering(op), nullptr)
            << "pointwise op without a Halide lowering in compiler/codegen/lower/";
        EXPECT_GT(op->cost.pointwise_elem, 0) << "no pointwise cost term";
        break;
      case FusionRole::kNone:
        EXPECT_FALSE(op->random) << "a random op must be fusable to declare its draws";
        EXPECT_FALSE(op->gpu_batch);
        break;
    }
    if (op->random && op->fusion == FusionRole::kPointwise) {
      EXPECT_GT(op->draw_slots, 0) << "random pointwise op without draw slots";
      EXPECT_TRUE(op->draw) << "random pointwise op without a draw function";
      EXPECT_LE(op->draw_slots, kMaxDrawSlots);
    }
    if (!op->random) {
      EXPECT_EQ(op->draw_slots, 0) << "draw slots on a deterministic op";
    }
    if (op->gpu_batch) {
      EXPECT_EQ(op->fusion, FusionRole::kPointwise);
      EXPECT_FALSE(op->random) << "GPU batch ops take no per-sample arguments";
    }
  }
  EXPECT_GE(geometry, 6);
  EXPECT_GE(pointwise, 5);
}

// A pointwise op the registry knows nothing to lower: the pipeline refuses it.
TEST(OpRegistryWalk, FusableOpWithoutLoweringIsACompileError) {
  static const OpDef fake{
      .name = "fake_pointwise", .op_class = OpClass::kPointwise, .fusion = FusionRole::kPointwise};
  FusedChain chain = MakeChain("k_fake", {{"resize", {{"size", Is({8, 8})}}}});
  chain.steps.push_back(ChainStep{&fake, {}, 7});
  auto built =
      codegen_internal::BuildChainPipeline(chain, /*gpu=*/false, Halide::get_host_target());
  ASSERT_FALSE(built);
  EXPECT_EQ(built.error().code, ErrorCode::kInternal);
  EXPECT_NE(built.error().message.find("fake_pointwise"), std::string::npos)
      << built.error().message;
  EXPECT_NE(built.error().message.find("no Halide lowering"), std::string::npos)
      << built.error().message;
}

// Each color_jitter step gets its own three slots, drawn from its own op id
// exactly as the reference implementation draws them.
TEST(OpRegistryWalk, TwoRandomStepsGetTheirOwnDrawSlots) {
  const ParamList jitter = {{"brightness", F(0.5)}, {"contrast", F(0.5)}, {"saturation", F(0.5)}};
  FusedChain chain = MakeChain("k_j2", {{"resize", {{"size", Is({16, 16})}}},
                                        {"color_jitter", jitter},
                                        testing::ImagenetNormalize(),
                                        {"color_jitter", jitter}});
  EXPECT_EQ(DrawSlotOffset(chain, 1), 0);
  EXPECT_EQ(DrawSlotOffset(chain, 3), 3);
  EXPECT_EQ(DrawSlotCount(chain), 6);
  ASSERT_TRUE(CheckFusable(chain));
  for (uint64_t sample : {0u, 5u, 99u}) {
    auto args = ComputeSampleArgs(chain, 40, 30, /*seed=*/7, /*epoch=*/1, sample);
    ASSERT_TRUE(args) << args.error().ToString();
    for (int step : {1, 3}) {
      SampleRng rng(7, 1, sample, static_cast<uint32_t>(chain.steps[step].op_id));
      const int base = DrawSlotOffset(chain, step);
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(args->draws[base + i], static_cast<float>(rng.Uniform(0.5, 1.5)))
            << "step " << step << " slot " << i;
      }
    }
    EXPECT_NE(args->draws[0], args->draws[3]);
    for (int i = 6; i < kMaxDrawSlots; ++i) EXPECT_EQ(args->draws[i], 0.0f);
  }
}

TEST(OpRegistryWalk, TooManyDrawSlotsAreNotFused) {
  std::vector<testing::StepSpec> steps = {{"resize", {{"size", Is({8, 8})}}}};
  for (int i = 0; i < kMaxDrawSlots / 3 + 1; ++i) steps.push_back({"color_jitter", {}});
  FusedChain chain = MakeChain("k_many", steps);
  auto st = CheckFusable(chain);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(st.error().message.find("draw slots"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace sluice
