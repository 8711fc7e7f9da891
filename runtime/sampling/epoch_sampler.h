// Which sample indices each rank reads, in which order, in each epoch.
//
// order=shuffle and order=sequential. Global order of an epoch: G(j) = P(j)
// for j in [0, n), where P is the IndexPermutation keyed by (seed, epoch) for
// shuffle, or the identity for sequential. Sharding interleaves that order
// over ranks like torch's DistributedSampler: rank r's local position p reads
// global position j = p * world_size + r. Every rank gets the same number of
// batches:
//  - remainder=drop: batches_per_rank = floor(n / (world_size * batch_size));
//    the last n mod (world_size * batch_size) global positions are dropped
//    (with shuffle, different samples each epoch).
//  - remainder=pad: batches_per_rank = ceil(n / (world_size * batch_size));
//    positions j >= n wrap to G(j mod n), i.e. repeat the start of the
//    epoch's order (IsPadding tells them apart; they repeat more than once
//    only if world_size * batch_size > n).
// Everything is random access: the index at (epoch, position) costs O(1).
//
// order=shard_shuffle (for shards read best in order, SamplerConfig::
// shard_starts). Each epoch:
//  1. The shard order is the IndexPermutation of [0, num_shards) keyed by
//     (seed, epoch): shard Q(0) first, then Q(1), ...; S is the sequence of
//     the n samples of the shards in that order (each shard in index order).
//  2. Rank r's slice is S[floor(r n / W), floor((r + 1) n / W)) (W =
//     world_size): contiguous, so a rank reads whole shards and only the
//     slice edges split a shard. Its length L_r is floor(n / W) or ceil.
//  3. The slice streams through a shuffle buffer of B = shuffle_buffer slots:
//     the first min(B, L_r) samples fill it; output step t draws a slot
//     uniformly with a hash keyed by (seed, epoch, rank, t), outputs it, and
//     refills the slot with the next stream sample (or, once the stream is
//     exhausted, moves the last slot into it and shrinks the buffer). B = 1
//     reads the slice in stream order. Output step t is one of the stream
//     samples [0, t + B): nothing is output before it was read.
//  4. batches_per_rank follows the same rules as above. drop: the rank outputs
//     the first floor(n / (W b)) * b steps (<= L_r); the samples of its slice
//     not output by then (still in the buffer or unread) are dropped, fewer
//     than W * b over all ranks, different ones each epoch. pad: after its L_r samples, local
//     position p >= L_r repeats local position p mod L_r (the start of the rank's own order); a
//     rank with an empty slice (only when n < W) repeats S[r mod n].
// The rank's order is materialized once per epoch (EpochSampler::Epoch) into
// a compact array (uint32 indices when n < 2^32): O(n / W) time and memory,
// then O(1) per position, so resuming from (epoch, position) recomputes the
// epoch and indexes it, exact mid-shard.
//
// In every order, within an epoch no sample is read twice across all ranks,
// except pad's repeats, and (epoch, position) is the whole resume state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/sampling/permutation.h"
#include "sluice/result.h"

namespace sluice::runtime {

enum class SampleOrder { kShuffle, kSequential, kShardShuffle };
// The order named `name` in a spec ("shuffle", "sequential", "shard_shuffle"),
// or nullopt for any other name.
std::optional<SampleOrder> ParseSampleOrder(std::string_view name);
enum class Remainder { kDrop, kPad };

struct SamplerConfig {
  uint64_t num_samples = 0;
  uint64_t seed = 0;
  SampleOrder order = SampleOrder::kShuffle;
  int rank = 0;
  int world_size = 1;
  uint64_t batch_size = 1;
  Remainder remainder = Remainder::kDrop;
  // order=kShardShuffle only: the first sample index of each shard
  // (Source::ShardStarts): starts at 0, non-decreasing, each <= num_samples;
  // shard k is [shard_starts[k], shard_starts[k + 1]), the last runs to
  // num_samples. Empty shards are allowed.
  std::vector<uint64_t> shard_starts;
  // order=kShardShuffle only: samples held in the shuffle buffer (>= 1).
  uint64_t shuffle_buffer = 10000;
};

// Where a rank is in the stream: the next sample it reads is at local
// `position` of `epoch`. This pair (plus the spec hash, kept elsewhere) is the
// whole resume state.
struct SamplerPosition {
  uint64_t epoch = 0;
  uint64_t position = 0;
  bool operator==(const SamplerPosition&) const = default;
};

// One epoch's order for one rank. shuffle/sequential: cheap to build (a few
// hashes). shard_shuffle: built in O(n / world_size) (see above) and shared
// by copies, so copying is cheap in every order.
class EpochOrder {
 public:
  uint64_t size() const { return samples_per_rank_; }
  // Sample index at local position p < size().
  uint64_t operator[](uint64_t p) const {
    if (table_ != nullptr) return table_->At(p);
    uint64_t j = GlobalPosition(p);
    if (j >= n_) j %= n_;  // pad: repeat the start of the epoch's order
    return shuffle_ ? perm_.Permute(j) : j;
  }
  // True if local position p is a pad repeat (remainder=pad only).
  bool IsPadding(uint64_t p) const {
    return table_ != nullptr ? p >= table_->real : GlobalPosition(p) >= n_;
  }
  // Writes the indices of positions [first, first + out.size()) into out;
  // requires first + out.size() <= size().
  void Fill(uint64_t first, std::span<uint64_t> out) const;

 private:
  friend class EpochSampler;
  // A rank's materialized shard_shuffle order: `real` output steps (the rest
  // of the epoch, pad only, wraps around them).
  struct Table {
    std::vector<uint32_t> narrow;  // used when n < 2^32
    std::vector<uint64_t> wide;    // else
    uint64_t real = 0;
    uint64_t At(uint64_t p) const {
      const uint64_t len = narrow.empty() ? wide.size() : narrow.size();
      if (p >= len) p %= len;
      return narrow.empty() ? wide[p] : narrow[p];
    }
  };
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
  std::shared_ptr<const Table> table_;  // shard_shuffle only
};

class EpochSampler {
 public:
  // Errors: kInvalidArgument for batch_size 0, world_size < 1, rank outside
  // [0, world_size), and for shard_shuffle: shuffle_buffer 0, or shard_starts
  // empty (with num_samples > 0) or not as SamplerConfig describes.
  static Result<EpochSampler> Create(const SamplerConfig& config);

  const SamplerConfig& config() const { return config_; }
  uint64_t batches_per_rank() const { return batches_per_rank_; }
  uint64_t samples_per_rank() const { return batches_per_rank_ * config_.batch_size; }

  // The rank's order of `epoch` (shard_shuffle: O(n / world_size), see above).
  EpochOrder Epoch(uint64_t epoch) const;
  // Sample index at (epoch, position); position < samples_per_rank(). Builds
  // Epoch(at.epoch): O(1) except for shard_shuffle; hold an EpochOrder to read
  // many positions.
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
