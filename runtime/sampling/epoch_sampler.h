// Which sample indices each rank reads, in which order, in each epoch.
//
// Global order of an epoch: G(j) = P(j) for j in [0, n), where P is the
// IndexPermutation keyed by (seed, epoch) for order=shuffle, or the identity
// for order=sequential. Sharding interleaves that order over ranks like
// torch's DistributedSampler: rank r's local position p reads global position
// j = p * world_size + r. Every rank gets the same number of batches:
//  - remainder=drop: batches_per_rank = floor(n / (world_size * batch_size));
//    the last n mod (world_size * batch_size) global positions are dropped
//    (with shuffle, different samples each epoch).
//  - remainder=pad: batches_per_rank = ceil(n / (world_size * batch_size));
//    positions j >= n wrap to G(j mod n), i.e. repeat the start of the
//    epoch's order (IsPadding tells them apart; they repeat more than once
//    only if world_size * batch_size > n).
// Within an epoch no sample is read twice across all ranks, except pad's
// repeats. Everything is random access: the index at (epoch, position) costs
// O(1), so resuming from (epoch, position) needs no replay.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/sampling/permutation.h"
#include "sluice/result.h"

namespace sluice::runtime {

enum class SampleOrder { kShuffle, kSequential };
enum class Remainder { kDrop, kPad };

struct SamplerConfig {
  uint64_t num_samples = 0;
  uint64_t seed = 0;
  SampleOrder order = SampleOrder::kShuffle;
  int rank = 0;
  int world_size = 1;
  uint64_t batch_size = 1;
  Remainder remainder = Remainder::kDrop;
};

// Where a rank is in the stream: the next sample it reads is at local
// `position` of `epoch`. This pair (plus the spec hash, kept elsewhere) is the
// whole resume state.
struct SamplerPosition {
  uint64_t epoch = 0;
  uint64_t position = 0;
  bool operator==(const SamplerPosition&) const = default;
};

// One epoch's order for one rank. Cheap to build (a few hashes).
class EpochOrder {
 public:
  uint64_t size() const { return samples_per_rank_; }
  // Sample index at local position p < size().
  uint64_t operator[](uint64_t p) const;
  // True if local position p is a pad repeat (remainder=pad only).
  bool IsPadding(uint64_t p) const { return GlobalPosition(p) >= n_; }
  // Writes the indices of positions [first, first + out.size()) into out;
  // requires first + out.size() <= size().
  void Fill(uint64_t first, std::span<uint64_t> out) const;

 private:
  friend class EpochSampler;
  EpochOrder(const SamplerConfig& c, uint64_t samples_per_rank, uint64_t epoch);
  uint64_t GlobalPosition(uint64_t p) const {
    return p * static_cast<uint64_t>(world_size_) + static_cast<uint64_t>(rank_);
  }

  uint64_t n_;
  int rank_;
  int world_size_;
  bool shuffle_;
  uint64_t samples_per_rank_;
  IndexPermutation perm_;
};

class EpochSampler {
 public:
  // Errors: kInvalidArgument for batch_size 0, world_size < 1, or rank
  // outside [0, world_size).
  static Result<EpochSampler> Create(const SamplerConfig& config);

  const SamplerConfig& config() const { return config_; }
  uint64_t batches_per_rank() const { return batches_per_rank_; }
  uint64_t samples_per_rank() const { return batches_per_rank_ * config_.batch_size; }

  EpochOrder Epoch(uint64_t epoch) const;
  // Sample index at (epoch, position); position < samples_per_rank().
  uint64_t IndexAt(SamplerPosition at) const { return Epoch(at.epoch)[at.position]; }
  // The position `count` samples after `at`, rolling into following epochs.
  // With samples_per_rank() == 0 the position never moves.
  SamplerPosition Advance(SamplerPosition at, uint64_t count) const;

 private:
  EpochSampler(const SamplerConfig& config, uint64_t batches)
      : config_(config), batches_per_rank_(batches) {}

  SamplerConfig config_;
  uint64_t batches_per_rank_;
};

struct DistributedEnv {
  int rank = 0;
  int world_size = 1;
};

// Parses torchrun's RANK and WORLD_SIZE values (nullptr = unset). Both unset
// -> rank 0 of 1. Errors (kInvalidArgument, naming the variable): only one
// set, not a non-negative decimal integer, world_size 0, rank >= world_size.
Result<DistributedEnv> ParseDistributedEnv(const char* rank, const char* world_size);
// ParseDistributedEnv(getenv("RANK"), getenv("WORLD_SIZE")).
Result<DistributedEnv> DistributedEnvFromEnvironment();

}  // namespace sluice::runtime
