// Online adjustment of the loader knobs a spec left `auto`.
//
// The loader allocates its pools for fixed maxima at Create (max_workers
// scratch slots, max_prefetch + 1 batch buffers) and then feeds this class one
// observation per interval (say every 0.5 s or every few batches): the
// images/s delivered in the interval and the fraction of the interval the
// consumer spent waiting inside Next(). The tuner answers with how many
// workers may be active and how many buffers may be filled ahead; the loader
// only ever uses a prefix of what it allocated, so tuning allocates nothing.
//
// Policy (a small hill-climber in the spirit of tf.data AUTOTUNE):
//   - The consumer is starved (wait fraction above `starved`): the loader is
//     the bottleneck. Add a worker if one is left; when none is, or when the
//     last added worker did not raise throughput, deepen prefetch (it absorbs
//     bursts, e.g. a slow epoch boundary).
//   - The consumer hardly waits (below `idle`): the trainer is the bottleneck;
//     after `patience` such intervals give back one worker, if the throughput
//     it kept is still within `keep` of the best seen (CPU for the trainer).
//   - A move that cost more than `keep` of throughput is undone and that
//     direction is frozen for `cooldown` intervals.
// Decisions are deterministic functions of the observations.
//
// Thread safety: none; the loader calls Observe from one thread (under its
// lock or from the consumer) and reads the knobs from the same place.
#pragma once

#include <cstdint>

namespace sluice::runtime {

class OnlineTuner {
 public:
  struct Limits {
    int max_workers = 1;   // scratch slots allocated
    int max_prefetch = 2;  // batch buffers allocated - 1
    int min_workers = 1;
    int min_prefetch = 1;
  };
  struct Config {
    double starved = 0.10;  // consumer wait fraction that means "loader too slow"
    double idle = 0.02;     // below: the trainer is the bottleneck
    double keep = 0.05;     // throughput loss a move may cost before it is undone
    int patience = 3;       // idle intervals before giving back a worker
    int cooldown = 8;       // intervals a reverted direction stays frozen
  };

  // Starts at `workers` / `prefetch` (clamped to the limits).
  OnlineTuner(Limits limits, int workers, int prefetch);
  OnlineTuner(Limits limits, int workers, int prefetch, Config config);

  // One interval's observation; returns true when the knobs changed.
  // images_per_second < 0 or a wait fraction outside [0, 1] is ignored.
  bool Observe(double images_per_second, double consumer_wait_fraction);

  int workers() const { return workers_; }
  int prefetch() const { return prefetch_; }
  int64_t moves() const { return moves_; }
  int64_t reverts() const { return reverts_; }

 private:
  enum class Move { kNone, kAddWorker, kAddPrefetch, kDropWorker };
  bool Apply(Move move);

  Limits limits_;
  Config config_;
  int workers_ = 1, prefetch_ = 1;
  Move last_move_ = Move::kNone;
  double before_move_ = 0;  // throughput just before the last move
  int idle_streak_ = 0;
  int freeze_add_worker_ = 0, freeze_drop_worker_ = 0, freeze_prefetch_ = 0;
  int64_t moves_ = 0, reverts_ = 0;
};

}  // namespace sluice::runtime
