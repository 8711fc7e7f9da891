// OnlineTuner against a simulated pipeline: throughput = min(worker capacity,
// trainer rate, storage cap); the consumer waits when the loader is slower
// than the trainer.
#include "runtime/exec/online_tuner.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace sluice::runtime {
namespace {

struct Sim {
  double per_worker = 100;  // images/s one worker produces
  double trainer = 1e9;     // images/s the trainer consumes
  double cap = 1e9;         // images/s storage allows
  double Rate(int workers) const { return std::min({per_worker * workers, trainer, cap}); }
  double Wait(int workers) const { return std::max(0.0, 1 - Rate(workers) / trainer); }
};

void Drive(OnlineTuner& t, const Sim& sim, int intervals) {
  for (int i = 0; i < intervals; ++i) {
    t.Observe(sim.Rate(t.workers()), sim.Wait(t.workers()));
    ASSERT_GE(t.workers(), 1);
    ASSERT_GE(t.prefetch(), 1);
  }
}

TEST(OnlineTunerTest, StartsClampedToLimits) {
  OnlineTuner t({/*max_workers=*/4, /*max_prefetch=*/3}, 9, 0);
  EXPECT_EQ(t.workers(), 4);
  EXPECT_EQ(t.prefetch(), 1);
}

TEST(OnlineTunerTest, LoaderBoundAddsWorkersUpToTheMaximum) {
  Sim sim;
  sim.trainer = 1000;  // the trainer could take 1000/s; 4 workers make 400/s
  OnlineTuner t({4, 4}, 1, 2);
  Drive(t, sim, 20);
  EXPECT_EQ(t.workers(), 4);
  // Still starved at the maximum: prefetch deepened to its limit, never beyond.
  EXPECT_EQ(t.prefetch(), 4);
}

TEST(OnlineTunerTest, TrainerBoundGivesBackWorkersButKeepsThroughput) {
  Sim sim;
  sim.trainer = 150;  // 2 workers (200/s) keep up; 1 worker (100/s) does not
  OnlineTuner t({4, 2}, 4, 2);
  Drive(t, sim, 60);
  EXPECT_EQ(t.workers(), 2);
  EXPECT_GE(t.reverts(), 1);  // the drop to 1 worker was tried and undone
}

TEST(OnlineTunerTest, WorkersThatDoNotHelpAreUndoneAndPrefetchDeepens) {
  Sim sim;
  sim.trainer = 1000;
  sim.cap = 100;  // storage-bound: one worker already saturates it
  OnlineTuner t({4, 6}, 1, 1);
  Drive(t, sim, 12);
  EXPECT_EQ(t.workers(), 1);
  EXPECT_GT(t.prefetch(), 1);
  EXPECT_LE(t.prefetch(), 6);
}

TEST(OnlineTunerTest, BalancedPipelineStaysPut) {
  Sim sim;
  sim.trainer = 200;
  sim.per_worker = 100;
  // 2 workers make exactly what the trainer takes; a wait of 0 with 2
  // workers would drop one, which hurts and is undone, then frozen.
  OnlineTuner t({4, 2}, 2, 2);
  Drive(t, sim, 200);
  EXPECT_EQ(t.workers(), 2);
  // Within the 200 intervals the drop is retried at most once per cooldown.
  EXPECT_LE(t.moves(), 200 / 8 + 2);
}

TEST(OnlineTunerTest, IgnoresInvalidObservations) {
  OnlineTuner t({4, 4}, 2, 2);
  EXPECT_FALSE(t.Observe(-1, 0.5));
  EXPECT_FALSE(t.Observe(100, 1.5));
  EXPECT_FALSE(t.Observe(100, -0.1));
  EXPECT_EQ(t.workers(), 2);
  EXPECT_EQ(t.prefetch(), 2);
  EXPECT_EQ(t.moves(), 0);
}

TEST(OnlineTunerTest, RespondsToAChangeInLoad) {
  Sim sim;
  sim.trainer = 150;
  OnlineTuner t({4, 4}, 4, 2);
  Drive(t, sim, 40);
  EXPECT_EQ(t.workers(), 2);
  sim.trainer = 1000;  // the trainer got faster (e.g. after a warm-up phase)
  Drive(t, sim, 40);
  EXPECT_EQ(t.workers(), 4);
}

}  // namespace
}  // namespace sluice::runtime
