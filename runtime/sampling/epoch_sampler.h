// Which sample indices each rank reads, in which order, in each epoch.
//
// Every epoch has one global order O of its n samples (positions 0..n-1):
//  - shuffle: O(j) = P(j), the IndexPermutation keyed by (seed, epoch);
//  - sequential: O(j) = j;
//  - shard_shuffle (for shards read best in order, SamplerConfig::
//    shard_starts), built for a world size W0 (the world size the epoch
//    started on, ConsumedSet::order_world):
//     1. The shard order is the IndexPermutation of [0, num_shards) keyed by
//        (seed, epoch): shard Q(0) first, then Q(1), ...; S is the sequence of
//        the n samples of the shards in that order (each shard in index order).
//     2. Rank r of W0 streams its slice S[floor(r n / W0), floor((r + 1) n /
//        W0)) (contiguous: whole shards, only slice edges split one) through a
//        shuffle buffer of B = shuffle_buffer slots: the first min(B, L_r)
//        samples fill it; output step t draws a slot uniformly with a hash
//        keyed by (seed, epoch, r, t), outputs it, and refills the slot with
//        the next stream sample (or, once the stream is exhausted, moves the
//        last slot into it and shrinks the buffer). B = 1 reads the slice in
//        stream order; output step t is one of the stream samples [0, t + B).
//     3. O is rank 0's L_0 outputs, then rank 1's, ... (O positions
//        [floor(r n / W0), floor((r + 1) n / W0)) are rank r's outputs).
//
// A segment (segment.h; LoaderState in include/sluice/loader.h) deals the
// positions of O not in a consumed set (U, R of them, in O order) to the
// world_size ranks; a fresh epoch is the segment with nothing consumed:
//  - shuffle, sequential: rank-interleaved batches: rank r's local position p
//    is U-index (floor(p / b) * W + r) * b + p mod b;
//  - shard_shuffle: rank r reads the run U[floor(r R / W), floor((r + 1) R /
//    W)) in order (in a fresh epoch: its own buffer's outputs, whole shards).
//  - remainder=drop: batches_per_rank = floor(R / (W b)); the positions no rank
//    reaches are dropped (fewer than W b; with shuffle, different ones each
//    epoch).
//  - remainder=pad: batches_per_rank = ceil(R / (W b)); slots past the real
//    positions are padding (IsPadding): padding slot q (interleaved: U-index R
//    + q; shard_shuffle: the rank's (k + 1)-th padding slot is q = k W + r)
//    repeats O(q mod n).
// shuffle and sequential are random access: the index at (epoch, position)
// costs O(log consumed ranges). shard_shuffle materializes the rank's order
// once per segment (EpochSampler::Segment) into a compact array (uint32
// indices when n < 2^32): O(n / W) in a fresh epoch, replaying the buffers of
// the W0 ranks whose outputs the run covers after a resize.
//
// In every order, within an epoch no sample is read twice across all ranks,
// except pad's repeats, across any sequence of segments.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/sampling/permutation.h"
#include "runtime/sampling/segment.h"
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

// One segment's order for one rank (a fresh epoch, or the rest of one after a
// consumed set). shuffle/sequential: cheap to build. shard_shuffle: built in
// O(n / world_size) (see above) and shared by copies, so copying is cheap in
// every order.
class EpochOrder {
 public:
  uint64_t size() const { return samples_per_rank_; }
  // Sample index at local position p < size().
  uint64_t operator[](uint64_t p) const {
    if (table_ != nullptr) return table_->At(p);
    return Global(Position(p));
  }
  // True if local position p is a pad repeat (remainder=pad only).
  bool IsPadding(uint64_t p) const { return !layout_.UIndex(rank_, p).has_value(); }
  // Writes the indices of positions [first, first + out.size()) into out;
  // requires first + out.size() <= size().
  void Fill(uint64_t first, std::span<uint64_t> out) const;

  // The segment: what was consumed before it (its order_world is the one O
  // uses) and how it deals the rest.
  const ConsumedSet& base() const { return *base_; }
  const SegmentLayout& layout() const { return layout_; }
  int rank() const { return rank_; }

 private:
  friend class EpochSampler;
  // A rank's materialized shard_shuffle order, padding included.
  struct Table {
    std::vector<uint32_t> narrow;  // used when n < 2^32
    std::vector<uint64_t> wide;    // else
    uint64_t At(uint64_t p) const { return narrow.empty() ? wide[p] : narrow[p]; }
  };
  EpochOrder(const SamplerConfig& c, const SegmentLayout& layout,
             std::shared_ptr<const ConsumedSet> base, uint64_t epoch);
  // The O position at local position p (padding: O(q mod n)).
  uint64_t Position(uint64_t p) const {
    if (auto u = layout_.UIndex(rank_, p)) return base_->Unconsumed(*u);
    return layout_.PaddingSlot(rank_, p) % n_;
  }
  uint64_t Global(uint64_t j) const { return shuffle_ ? perm_.Permute(j) : j; }

  uint64_t n_;
  int rank_;
  bool shuffle_;
  uint64_t samples_per_rank_;
  SegmentLayout layout_;
  std::shared_ptr<const ConsumedSet> base_;
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
  EpochOrder Epoch(uint64_t epoch) const { return Segment(epoch, ConsumedSet()); }
  // The rank's order of the rest of `epoch` after `consumed` (positions < n;
  // for shard_shuffle a non-empty set names its order_world).
  EpochOrder Segment(uint64_t epoch, const ConsumedSet& consumed) const;
  // How a segment after `consumed` deals the rest (for any rank).
  SegmentLayout Layout(const ConsumedSet& consumed) const;
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
// torchrun's LOCAL_RANK value (nullptr = unset -> 0). Errors
// (kInvalidArgument): not a non-negative decimal integer.
Result<int> ParseLocalRank(const char* local_rank);
// ParseDistributedEnv(getenv("RANK"), getenv("WORLD_SIZE")).
Result<DistributedEnv> DistributedEnvFromEnvironment();

}  // namespace sluice::runtime
