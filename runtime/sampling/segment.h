// Elastic resume arithmetic (LoaderState in include/sluice/loader.h): the
// consumed positions of an epoch's global order O, and how the unconsumed
// rest is dealt to the ranks of a segment. Pure integer math; the order O
// itself lives in epoch_sampler.h.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace sluice::runtime {

struct PosRange {
  uint64_t begin = 0, end = 0;
  bool operator==(const PosRange&) const = default;
};

// A set of positions of O: [0, prefix) plus `ranges` (ascending, disjoint, not
// touching each other or the prefix). order_world: shard_shuffle's O key (see
// LoaderState::order_world_size), 0 when not fixed.
class ConsumedSet {
 public:
  ConsumedSet() = default;
  // Normalizes: sorts, merges touching ranges, folds them into the prefix.
  ConsumedSet(uint64_t prefix, std::vector<PosRange> ranges, int order_world = 0);

  uint64_t prefix() const { return prefix_; }
  const std::vector<PosRange>& ranges() const { return ranges_; }
  int order_world() const { return order_world_; }
  void set_order_world(int w) { order_world_ = w; }
  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }
  // The largest consumed position + 1 (0 when empty).
  uint64_t end() const { return ranges_.empty() ? prefix_ : ranges_.back().end; }
  bool Contains(uint64_t begin, uint64_t end) const;  // all of [begin, end)

  // Adds [begin, end).
  void Add(uint64_t begin, uint64_t end);
  // The u-th (0-based) position not in this set. O(log ranges).
  uint64_t Unconsumed(uint64_t u) const;
  // Adds the positions base.Unconsumed(u), u in [first, last).
  void AddUnconsumedOf(const ConsumedSet& base, uint64_t first, uint64_t last);

  // a ∪ b (a's order_world, else b's).
  static ConsumedSet Union(const ConsumedSet& a, const ConsumedSet& b);

  bool operator==(const ConsumedSet& o) const {
    return prefix_ == o.prefix_ && ranges_ == o.ranges_ && order_world_ == o.order_world_;
  }

 private:
  void Reindex();
  uint64_t prefix_ = 0;
  std::vector<PosRange> ranges_;
  int order_world_ = 0;
  uint64_t count_ = 0;
  // gap_[i]: unconsumed positions before ranges_[i]; len_[i]: consumed
  // positions in ranges_[0..i).
  std::vector<uint64_t> gap_, len_{0};
};

// How a segment deals the R unconsumed positions U (U-indices 0..R-1) to
// `world` ranks in batches of `batch` (LoaderState): interleaved batches
// (shuffle, sequential) or contiguous runs (shard_shuffle).
struct SegmentLayout {
  uint64_t real = 0;  // R
  uint64_t batch = 1;
  int world = 1;
  bool contiguous = false;
  bool pad = false;

  // Batches every rank yields: drop floor(R / (world b)), pad ceil (0 when R is 0).
  uint64_t batches_per_rank() const;
  // Contiguous: rank r's run [RunBegin(r), RunBegin(r + 1)).
  uint64_t RunBegin(int rank) const;
  // The U-index at rank-local position p, or nullopt for a padding slot
  // (PaddingSlot gives its number q).
  std::optional<uint64_t> UIndex(int rank, uint64_t p) const;
  uint64_t PaddingSlot(int rank, uint64_t p) const;
  // U-indices [first, last) of the real slots of rank-local batch k.
  PosRange BatchU(int rank, uint64_t k) const;
};

// Adds to `out` the positions of rank `rank`'s batches [0, first_batches)
// and `ahead` in the segment after `base` dealt by `l`.
void AddRankBatches(ConsumedSet& out, const ConsumedSet& base, const SegmentLayout& l, int rank,
                    uint64_t first_batches, const std::vector<uint64_t>& ahead);
// Adds the positions of every rank's first `batches` batches (ranks in
// lockstep) of the segment after `base`.
void AddLockstep(ConsumedSet& out, const ConsumedSet& base, const SegmentLayout& l,
                 uint64_t batches);

}  // namespace sluice::runtime
