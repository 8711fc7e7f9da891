// Online knob adjustment (runtime/exec/online_tuner.h).
#include "runtime/exec/online_tuner.h"

#include <algorithm>

namespace sluice::runtime {

OnlineTuner::OnlineTuner(Limits limits, int workers, int prefetch)
    : OnlineTuner(limits, workers, prefetch, Config{}) {}

OnlineTuner::OnlineTuner(Limits limits, int workers, int prefetch, Config config)
    : limits_(limits), config_(config) {
  limits_.max_workers = std::max(1, limits_.max_workers);
  limits_.min_workers = std::clamp(limits_.min_workers, 1, limits_.max_workers);
  limits_.max_prefetch = std::max(1, limits_.max_prefetch);
  limits_.min_prefetch = std::clamp(limits_.min_prefetch, 1, limits_.max_prefetch);
  workers_ = std::clamp(workers, limits_.min_workers, limits_.max_workers);
  prefetch_ = std::clamp(prefetch, limits_.min_prefetch, limits_.max_prefetch);
}

bool OnlineTuner::Apply(Move move) {
  switch (move) {
    case Move::kAddWorker:
      if (workers_ >= limits_.max_workers) return false;
      ++workers_;
      break;
    case Move::kDropWorker:
      if (workers_ <= limits_.min_workers) return false;
      --workers_;
      break;
    case Move::kAddPrefetch:
      if (prefetch_ >= limits_.max_prefetch) return false;
      ++prefetch_;
      break;
    case Move::kNone: return false;
  }
  ++moves_;
  return true;
}

bool OnlineTuner::Observe(double rate, double wait) {
  if (!(rate >= 0) || !(wait >= 0 && wait <= 1)) return false;
  for (int* f : {&freeze_add_worker_, &freeze_drop_worker_, &freeze_prefetch_}) {
    if (*f > 0) --*f;
  }

  // First interval after a move: keep it, or undo it.
  if (last_move_ != Move::kNone) {
    const Move m = last_move_;
    last_move_ = Move::kNone;
    const bool hurt = rate < before_move_ * (1 - config_.keep);
    // An added worker must pay for its CPU: no measurable gain = undo.
    const bool useless =
        m == Move::kAddWorker && rate <= before_move_ * (1 + config_.keep / 2);
    if (hurt || useless) {
      ++reverts_;
      switch (m) {
        case Move::kAddWorker:
          --workers_;
          freeze_add_worker_ = config_.cooldown;
          break;
        case Move::kDropWorker:
          ++workers_;
          freeze_drop_worker_ = config_.cooldown;
          break;
        case Move::kAddPrefetch:
          --prefetch_;
          freeze_prefetch_ = config_.cooldown;
          break;
        case Move::kNone: break;
      }
      idle_streak_ = 0;
      return true;
    }
  }

  Move next = Move::kNone;
  if (wait > config_.starved) {
    idle_streak_ = 0;
    if (workers_ < limits_.max_workers && freeze_add_worker_ == 0) {
      next = Move::kAddWorker;
    } else if (prefetch_ < limits_.max_prefetch && freeze_prefetch_ == 0) {
      next = Move::kAddPrefetch;
    }
  } else if (wait < config_.idle) {
    if (++idle_streak_ >= config_.patience && workers_ > limits_.min_workers &&
        freeze_drop_worker_ == 0) {
      idle_streak_ = 0;
      next = Move::kDropWorker;
    }
  } else {
    idle_streak_ = 0;
  }
  if (next == Move::kNone || !Apply(next)) return false;
  last_move_ = next;
  before_move_ = rate;
  return true;
}

}  // namespace sluice::runtime
