// ResolveLoaderConfig (runtime/exec/loader_config.h): plan + LoaderOptions +
// environment -> LoaderConfig, without opening a source or a device. Uses the
// loader tests' compiled plan (its dataset is never read) and copies of it
// with plan.json edited.
#include "runtime/exec/loader_config.h"

#include <gtest/gtest.h>

#include "runtime/plan/plan_internal.h"
#include "tests/runtime/exec/staged_layout.h"
#include "tests/runtime/loader/loader_test_util.h"

namespace sluice {
namespace {

using namespace testing_loader;
using nlohmann::json;
using runtime::ErrorPolicy;
using runtime::LoaderConfig;
using runtime::LoaderEnvironment;
using runtime::ResolveLoaderConfig;

// An environment with `cores` cores, no RANK / WORLD_SIZE and no GPU; counts
// the calls of open_gpu in *gpu_calls.
LoaderEnvironment Env(unsigned cores = 6, int* gpu_calls = nullptr) {
  LoaderEnvironment env;
  env.usable_cores = cores;
  env.distributed = runtime::DistributedEnv{};
  env.open_gpu = [gpu_calls](int) -> Status {
    if (gpu_calls) ++*gpu_calls;
    return MakeError(ErrorCode::kUnsupported, "no device in this test");
  };
  return env;
}

class LoaderConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SLUICE_REQUIRE_TEST_PLAN();
    dir_ = std::make_unique<ScopedDir>("loader_config");
  }
  // The test plan, with plan.json edited by `edit` when given.
  Plan Load(const std::function<void(json&)>& edit = nullptr) {
    std::string path = TestPlan().path;
    if (edit) path = EditedPlan(dir_->path(), "p" + std::to_string(++copies_) + ".plan", edit);
    auto plan = Plan::Load(path, {{"DATA", "/no/such/data"}});
    EXPECT_TRUE(plan) << plan.error().ToString();
    return *plan;
  }
  // The test plan with a GPU stage from `normalize` on (the CPU part bound to
  // the chain's own kernel symbol: the config never runs it).
  Plan LoadWithGpuStage() {
    return Load([](json& j) {
      json& g = j["fusion_groups"][0];
      g["gpu_from"] = 2;
      g["cpu_part_symbol"] = g["symbol"];
      g["gpu_batch_symbol"] = "no_such_batch_kernel";
      g["staging_type"] = {{"dtype", "uint8"}, {"layout", "CHW"}, {"dims", {3, 32, 32}}};
      j["placement"]["device"] = "cuda:1";
      j["output"]["device"] = "auto";
      testing_gpu::SetStagedLayout(j, "image", 32 * 32 * 3);
    });
  }
  std::unique_ptr<ScopedDir> dir_;
  int copies_ = 0;
};

TEST_F(LoaderConfigTest, ResolvesTheTestPlanWithAutoKnobs) {
  Plan plan = Load();
  int gpu_calls = 0;
  auto c = ResolveLoaderConfig(plan, {}, Env(6, &gpu_calls));
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(gpu_calls, 0);  // device: cpu
  EXPECT_EQ(c->where, "plan `" + plan.path() + "`");
  EXPECT_EQ(c->spec_hash, plan.spec_hash());
  EXPECT_EQ(c->source_format, "image_folder");
  EXPECT_EQ(c->source_params.at("path").AsString(), "/no/such/data");
  EXPECT_EQ(c->decode_op, "decode_jpeg");
  EXPECT_EQ(c->decode_params.at("color").AsString(), "rgb");
  EXPECT_EQ(c->channels, 3);
  EXPECT_TRUE(c->pushdown.region);
  EXPECT_FALSE(c->pushdown.dct_scaling);
  EXPECT_EQ(c->batch_size, 4);
  ASSERT_EQ(c->fields.size(), 2u);  // sorted by name
  const runtime::FieldLayout& image = c->fields[0];
  EXPECT_EQ(image.name, "image");
  EXPECT_EQ(image.dtype, DType::kFloat32);
  EXPECT_EQ(image.sample_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(image.sample_bytes, 3u * 32 * 32 * 4);
  EXPECT_EQ(image.host_sample_bytes, image.sample_bytes);
  EXPECT_EQ(image.offset, 0u);
  EXPECT_EQ(image.chain, 0);
  EXPECT_EQ(image.steps, &plan.chains()[0]);
  EXPECT_EQ(image.kernel, &plan.cpu_kernel(0));
  EXPECT_FALSE(image.gpu);
  const runtime::FieldLayout& label = c->fields[1];
  EXPECT_EQ(label.name, "label");
  EXPECT_EQ(label.dtype, DType::kInt64);
  EXPECT_EQ(label.chain, -1);
  EXPECT_EQ(label.reference, -1);
  EXPECT_EQ(label.steps, nullptr);
  EXPECT_EQ(label.offset, 4u * 3 * 32 * 32 * 4);
  EXPECT_EQ(label.sample_bytes, 8u);
  EXPECT_EQ(c->buffer_bytes, label.offset + 64);  // 4 labels, rounded up to 64 bytes
  // Knobs: the auto rule (hardware concurrency; in_flight = threads;
  // prefetch 2), tuned online.
  EXPECT_EQ(c->threads, 6);
  EXPECT_EQ(c->workers, 6);
  EXPECT_EQ(c->prefetch, 2);
  EXPECT_EQ(c->pool_buffers(), 3);
  EXPECT_TRUE(c->online_tuning);
  EXPECT_EQ(c->policy, ErrorPolicy::kSkip);
  EXPECT_DOUBLE_EQ(c->max_fraction, 0.5);
  EXPECT_FALSE(c->relaxed);
  EXPECT_EQ(c->seed, 7u);
  EXPECT_EQ(c->first_epoch, 0u);
  EXPECT_EQ(c->sampler.seed, 7u);
  EXPECT_EQ(c->sampler.order, runtime::SampleOrder::kShuffle);
  EXPECT_EQ(c->sampler.remainder, runtime::Remainder::kDrop);
  EXPECT_EQ(c->sampler.batch_size, 4u);
  EXPECT_EQ(c->sampler.rank, 0);
  EXPECT_EQ(c->sampler.world_size, 1);
  EXPECT_FALSE(c->gpu.use);
  EXPECT_EQ(c->device, "cpu");
  EXPECT_TRUE(c->warnings.empty());
}

// source.read_timeout: the plan's value; the registry's default (30 s) for a
// plan written before the parameter existed; a negative value is refused.
TEST_F(LoaderConfigTest, ReadTimeoutComesFromTheSourceParams) {
  auto given = ResolveLoaderConfig(
      Load([](json& j) { j["source"]["params"]["read_timeout"] = 0.25; }), {}, Env(2));
  ASSERT_TRUE(given) << given.error().ToString();
  EXPECT_EQ(given->read_timeout, 0.25);
  auto old = ResolveLoaderConfig(Load([](json& j) { j["source"]["params"].erase("read_timeout"); }),
                                 {}, Env(2));
  ASSERT_TRUE(old) << old.error().ToString();
  EXPECT_EQ(old->read_timeout, 30.0);
  auto negative = ResolveLoaderConfig(
      Load([](json& j) { j["source"]["params"]["read_timeout"] = -1.0; }), {}, Env(2));
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("source.read_timeout"), std::string::npos);
}

TEST_F(LoaderConfigTest, UnknownHardwareConcurrencyCountsAsOne) {
  auto c = ResolveLoaderConfig(Load(), {}, Env(0));
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->threads, 1);
  EXPECT_EQ(c->workers, 1);
}

TEST_F(LoaderConfigTest, OptionsOverrideThePlan) {
  LoaderOptions o;
  o.threads = 3;
  o.in_flight = 2;
  o.prefetch = 5;
  o.seed = 99;
  o.epoch = 4;
  o.relaxed_ordering = true;
  o.dct_scaling = true;
  o.rank = 1;
  o.world_size = 3;
  auto c = ResolveLoaderConfig(Load(), o, Env());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->threads, 3);
  EXPECT_EQ(c->workers, 2);  // min(threads, in_flight)
  EXPECT_EQ(c->prefetch, 5);
  EXPECT_EQ(c->pool_buffers(), 6);
  EXPECT_FALSE(c->online_tuning);
  EXPECT_EQ(c->seed, 99u);
  EXPECT_EQ(c->sampler.seed, 99u);
  EXPECT_EQ(c->first_epoch, 4u);
  EXPECT_TRUE(c->relaxed);
  EXPECT_TRUE(c->pushdown.dct_scaling);
  EXPECT_EQ(c->sampler.rank, 1);
  EXPECT_EQ(c->sampler.world_size, 3);
}

// Above the maxima (LoaderOptions::kMax*) is an error naming the knob, from
// any source: an int64 from the spec once narrowed to 0 workers (a hang).
TEST_F(LoaderConfigTest, KnobsAboveTheirMaximaAreErrors) {
  LoaderOptions o;
  o.prefetch = LoaderOptions::kMaxPrefetch + 1;
  auto c = ResolveLoaderConfig(Load(), o, Env());
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("prefetch 1025 is above 1024"), std::string::npos)
      << c.error().message;
  Plan tampered = Load([](json& j) { j["tuned"] = {{"threads", 5000}}; });
  c = ResolveLoaderConfig(tampered, {}, Env());
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("threads 5000 is above 4096"), std::string::npos)
      << c.error().message;
  o = {};
  o.threads = LoaderOptions::kMaxThreads;
  EXPECT_TRUE(ResolveLoaderConfig(Load(), o, Env()));
}

TEST_F(LoaderConfigTest, ZeroKnobOptionIsAnError) {
  for (int which = 0; which < 3; ++which) {
    LoaderOptions o;
    (which == 0 ? o.threads : which == 1 ? o.prefetch : o.in_flight) = 0;
    auto c = ResolveLoaderConfig(Load(), o, Env());
    ASSERT_FALSE(c) << which;
    EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST_F(LoaderConfigTest, SpecValuesBeatTunedValuesWhichBeatTheAutoRule) {
  Plan tuned = Load([](json& j) {
    j["tuned"] = {{"threads", 5}, {"in_flight", 3}, {"prefetch", 4}, {"cpu_budget", 5}};
  });
  auto c = ResolveLoaderConfig(tuned, {}, Env());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->threads, 5);
  EXPECT_EQ(c->workers, 3);
  EXPECT_EQ(c->prefetch, 4);
  EXPECT_FALSE(c->online_tuning);

  Plan both = Load([](json& j) {
    j["tuned"] = {{"threads", 5}, {"in_flight", 3}, {"prefetch", 4}};
    j["output"]["threads"] = 2;
    j["output"]["prefetch"] = 7;
  });
  c = ResolveLoaderConfig(both, {}, Env());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->threads, 2);
  EXPECT_EQ(c->workers, 2);  // min(2, tuned in_flight 3)
  EXPECT_EQ(c->prefetch, 7);
  EXPECT_FALSE(c->online_tuning);

  Plan budget = Load([](json& j) { j["output"]["cpu_budget"] = 3; });
  c = ResolveLoaderConfig(budget, {}, Env(16));
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->threads, 3);  // cpu_budget before the hardware concurrency
  EXPECT_TRUE(c->online_tuning);
}

TEST_F(LoaderConfigTest, ShardingComesFromOptionsThenPlanThenEnvironment) {
  LoaderEnvironment env = Env();
  env.distributed = runtime::DistributedEnv{2, 4};
  auto c = ResolveLoaderConfig(Load(), {}, env);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->sampler.rank, 2);
  EXPECT_EQ(c->sampler.world_size, 4);

  Plan explicit_plan = Load([](json& j) {
    j["sampling"]["rank"] = 1;
    j["sampling"]["world_size"] = 2;
  });
  c = ResolveLoaderConfig(explicit_plan, {}, env);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->sampler.rank, 1);
  EXPECT_EQ(c->sampler.world_size, 2);

  // A malformed RANK is an error only when the environment decides.
  env.distributed = MakeError(ErrorCode::kInvalidArgument, "RANK is not a number");
  c = ResolveLoaderConfig(Load(), {}, env);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().message, "RANK is not a number");
  LoaderOptions o;
  o.rank = 0;
  o.world_size = 1;
  EXPECT_TRUE(ResolveLoaderConfig(Load(), o, env));
  Plan unsharded = Load([](json& j) { j["sampling"]["sharding"] = "none"; });
  c = ResolveLoaderConfig(unsharded, {}, env);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->sampler.rank, 0);
  EXPECT_EQ(c->sampler.world_size, 1);
}

// Each of rank and world size is resolved on its own: a spec that fixes only
// world_size still takes each process's rank from RANK (they were all rank
// 0 before), and a rank that does not fit the world size is an error.
TEST_F(LoaderConfigTest, ALoneWorldSizeTakesTheRankFromTheEnvironment) {
  LoaderEnvironment env = Env();
  env.distributed = runtime::DistributedEnv{1, 2};
  Plan world_only = Load([](json& j) { j["sampling"]["world_size"] = 2; });
  auto c = ResolveLoaderConfig(world_only, {}, env);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->sampler.rank, 1);
  EXPECT_EQ(c->sampler.world_size, 2);

  LoaderOptions o;
  o.world_size = 2;  // the C++ options alone, likewise
  c = ResolveLoaderConfig(Load(), o, env);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->sampler.rank, 1);
  EXPECT_EQ(c->sampler.world_size, 2);

  // Without RANK / WORLD_SIZE, the missing field takes its default.
  c = ResolveLoaderConfig(world_only, {}, Env());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->sampler.rank, 0);
  EXPECT_EQ(c->sampler.world_size, 2);

  env.distributed = runtime::DistributedEnv{3, 4};
  c = ResolveLoaderConfig(world_only, {}, env);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.error().message.find("rank 3 (from RANK) is not below world_size 2 (set explicitly)"),
            std::string::npos)
      << c.error().message;

  o = {};
  o.rank = 2;
  o.world_size = 0;
  c = ResolveLoaderConfig(Load(), o, Env());
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("must be at least 1"), std::string::npos);
}

// The kernels write each field's slots unchecked: a plan.json whose memory
// section puts them outside the buffer, or on top of each other, is corrupt
// (a tampered batch_bytes overflowed the heap).
TEST_F(LoaderConfigTest, AMemoryLayoutOutsideTheBufferIsCorrupt) {
  const std::vector<std::function<void(json&)>> edits = {
      [](json& j) { j["memory"]["batch_bytes"] = 16; },
      [](json& j) { j["memory"]["fields"][1]["offset"] = 1000000000; },
      [](json& j) { j["memory"]["fields"][1]["offset"] = -8; },
      [](json& j) { j["memory"]["fields"][1]["offset"] = 8; },  // inside the image field
      [](json& j) { j["memory"]["batch_bytes"] = 0; },
  };
  ASSERT_TRUE(ResolveLoaderConfig(Load(), {}, Env()));
  for (size_t i = 0; i < edits.size(); ++i) {
    auto c = ResolveLoaderConfig(Load(edits[i]), {}, Env());
    ASSERT_FALSE(c) << "edit " << i;
    EXPECT_EQ(c.error().code, ErrorCode::kCorruptData) << c.error().ToString();
    EXPECT_NE(c.error().message.find("plan.json \"memory\""), std::string::npos)
        << c.error().message;
  }
}

TEST_F(LoaderConfigTest, ErrorPolicyAndOrderingFromThePlan) {
  Plan plan = Load([](json& j) {
    j["output"]["on_error"] = {{"policy", "replace"}, {"max_fraction", 0.25}};
    j["output"]["ordering"] = "relaxed";
    j["sampling"]["order"] = "sequential";
    j["sampling"]["remainder"] = "pad";
  });
  auto c = ResolveLoaderConfig(plan, {}, Env());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->policy, ErrorPolicy::kReplace);
  EXPECT_DOUBLE_EQ(c->max_fraction, 0.25);
  EXPECT_TRUE(c->relaxed);
  EXPECT_EQ(c->sampler.order, runtime::SampleOrder::kSequential);
  EXPECT_EQ(c->sampler.remainder, runtime::Remainder::kPad);
  LoaderOptions strict;
  strict.relaxed_ordering = false;
  c = ResolveLoaderConfig(plan, strict, Env());
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->relaxed);

  Plan sharded = Load([](json& j) {
    j["sampling"]["order"] = "shard_shuffle";
    j["sampling"]["shuffle_buffer"] = 123;
  });
  c = ResolveLoaderConfig(sharded, {}, Env());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(c->sampler.order, runtime::SampleOrder::kShardShuffle);
  EXPECT_EQ(c->sampler.shuffle_buffer, 123u);
  Plan unknown = Load([](json& j) { j["sampling"]["order"] = "random"; });
  c = ResolveLoaderConfig(unknown, {}, Env());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidSpec);

  Plan fail = Load([](json& j) { j["output"]["on_error"] = {{"policy", "fail"}}; });
  c = ResolveLoaderConfig(fail, {}, Env());
  ASSERT_TRUE(c);
  EXPECT_EQ(c->policy, ErrorPolicy::kFail);
}

TEST_F(LoaderConfigTest, BatchErrors) {
  Plan zero = Load([](json& j) { j["batch"]["size"] = 0; });
  auto c = ResolveLoaderConfig(zero, {}, Env());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.error().message.find("batch.size must be positive"), std::string::npos);

  Plan unknown = Load([](json& j) { j["batch"]["fields"]["extra"] = "no_such_tensor"; });
  c = ResolveLoaderConfig(unknown, {}, Env());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(c.error().message.find("batch field `extra`"), std::string::npos);
}

TEST_F(LoaderConfigTest, DeviceNamesAreCheckedAndCudaWithoutAStageWarns) {
  LoaderOptions o;
  o.device = "tpu";
  auto c = ResolveLoaderConfig(Load(), o, Env());
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);

  int gpu_calls = 0;
  o.device = "cuda:1";
  c = ResolveLoaderConfig(Load(), o, Env(6, &gpu_calls));
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(gpu_calls, 0);
  EXPECT_FALSE(c->gpu.use);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("has no GPU stage"), std::string::npos) << c->warnings[0];
}

TEST_F(LoaderConfigTest, GpuStageLaysOutStagingAndDeviceBlocks) {
  Plan plan = LoadWithGpuStage();
  ASSERT_TRUE(plan.gpu_stages()[0].has_value());
  LoaderEnvironment env = Env();
  int opened = -1;
  env.open_gpu = [&opened](int ordinal) -> Status {
    opened = ordinal;
    return Ok();
  };
  auto c = ResolveLoaderConfig(plan, {}, env);
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_EQ(opened, 1);  // placement's device
  EXPECT_TRUE(c->gpu.use);
  EXPECT_EQ(c->gpu.ordinal, 1);
  EXPECT_EQ(c->device, "cuda:1");
  EXPECT_TRUE(c->warnings.empty());
  const runtime::FieldLayout& image = c->fields[0];
  EXPECT_TRUE(image.gpu);
  EXPECT_EQ(image.kernel, plan.cpu_part_kernel(0));
  EXPECT_EQ(image.host_sample_bytes, 32u * 32 * 3);
  EXPECT_EQ(image.staging.ToString(), "uint8[3,32,32] CHW");
  EXPECT_EQ(image.gpu_batch_symbol, "no_such_batch_kernel");
  EXPECT_EQ(image.device_staging, 0u);
  EXPECT_GE(image.device_output, 4u * 32 * 32 * 3);
  EXPECT_GE(c->gpu.device_bytes, image.device_output + image.sample_bytes * 4);
  EXPECT_EQ(c->fields[1].offset, 4u * 32 * 32 * 3);  // the label after the staging images

  // No usable device: `auto` falls back to the CPU with a warning (the whole
  // chain's kernel); a forced cuda is an error.
  auto fallback = ResolveLoaderConfig(plan, {}, Env());
  ASSERT_TRUE(fallback) << fallback.error().ToString();
  EXPECT_FALSE(fallback->gpu.use);
  EXPECT_EQ(fallback->device, "cpu");
  EXPECT_FALSE(fallback->fields[0].gpu);
  EXPECT_EQ(fallback->fields[0].kernel, &plan.cpu_kernel(0));
  ASSERT_EQ(fallback->warnings.size(), 1u);
  EXPECT_NE(fallback->warnings[0].find("no device in this test"), std::string::npos);
  LoaderOptions forced;
  forced.device = "cuda";
  auto error = ResolveLoaderConfig(plan, forced, Env());
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().code, ErrorCode::kUnsupported);
  // device: cpu never asks for the device.
  int gpu_calls = 0;
  LoaderOptions cpu;
  cpu.device = "cpu";
  auto on_cpu = ResolveLoaderConfig(plan, cpu, Env(6, &gpu_calls));
  ASSERT_TRUE(on_cpu);
  EXPECT_EQ(gpu_calls, 0);
  EXPECT_TRUE(on_cpu->warnings.empty());
}

TEST_F(LoaderConfigTest, ReferenceFieldTurnsPushdownOffAndWarns) {
  // The fusion group moved to a reference chain.
  Plan plan = Load([](json& j) {
    json g = j["fusion_groups"][0];
    j["reference_chains"] = json::array({json{{"batch_field", "image"},
                                              {"symbol", "reference:image"},
                                              {"nodes", g["nodes"]},
                                              {"input", g["input"]},
                                              {"input_type", g["input_type"]},
                                              {"output", g["output"]},
                                              {"output_type", g["output_type"]},
                                              {"steps", g["steps"]},
                                              {"reason", "not fused: for this test"}}});
    j["fusion_groups"] = json::array();
    // What the compiler's decode_pushdown pass writes for such a plan.
    j["decode"]["pushdown"] = json{{"roi", false},
                                   {"dct_scaling", false},
                                   {"reason",
                                    "off: a batch field runs on the reference "
                                    "implementations"}};
  });
  ASSERT_EQ(plan.reference_chains().size(), 1u);
  EXPECT_EQ(plan.decode_op(), "decode_jpeg");
  auto c = ResolveLoaderConfig(plan, {}, Env());
  ASSERT_TRUE(c) << c.error().ToString();
  EXPECT_FALSE(c->pushdown.region);
  EXPECT_EQ(c->fields[0].reference, 0);
  EXPECT_EQ(c->fields[0].steps, &plan.reference_chains()[0]);
  EXPECT_EQ(c->fields[0].kernel, nullptr);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("batch field `image` is not fused (for this test); it runs on the "
                                "reference implementations"),
            std::string::npos)
      << c->warnings[0];
}

TEST(EffectivePushdownTest, OnlyWhatTheDecoderCanDo) {
  using runtime::DecoderCaps;
  using runtime::EffectivePushdown;
  using runtime::PushdownConfig;
  const PushdownConfig all{.region = true, .dct_scaling = true};
  auto both = EffectivePushdown(all, {.region_of_interest = true, .dct_scaling = true});
  EXPECT_TRUE(both.region && both.dct_scaling);
  auto roi = EffectivePushdown(all, {.region_of_interest = true, .dct_scaling = false});
  EXPECT_TRUE(roi.region);
  EXPECT_FALSE(roi.dct_scaling);
  auto none = EffectivePushdown(all, DecoderCaps{});
  EXPECT_FALSE(none.region || none.dct_scaling);
  // DCT scaling only applies to a region request.
  auto dct_only = EffectivePushdown(all, {.region_of_interest = false, .dct_scaling = true});
  EXPECT_FALSE(dct_only.region || dct_only.dct_scaling);
  auto unwanted = EffectivePushdown({.region = false, .dct_scaling = true},
                                    {.region_of_interest = true, .dct_scaling = true});
  EXPECT_FALSE(unwanted.region || unwanted.dct_scaling);
}

}  // namespace
}  // namespace sluice
