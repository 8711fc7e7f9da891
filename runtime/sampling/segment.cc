#include "runtime/sampling/segment.h"

#include <algorithm>

namespace sluice::runtime {

ConsumedSet::ConsumedSet(uint64_t prefix, std::vector<PosRange> ranges, int order_world)
    : prefix_(prefix), order_world_(order_world) {
  std::sort(ranges.begin(), ranges.end(),
            [](const PosRange& a, const PosRange& b) { return a.begin < b.begin; });
  for (const PosRange& r : ranges) {
    if (r.begin >= r.end) continue;
    if (r.begin <= prefix_) {
      prefix_ = std::max(prefix_, r.end);
    } else if (!ranges_.empty() && r.begin <= ranges_.back().end) {
      ranges_.back().end = std::max(ranges_.back().end, r.end);
    } else {
      ranges_.push_back(r);
    }
  }
  // Ranges swallowed by a prefix that grew past them.
  size_t drop = 0;
  while (drop < ranges_.size() && ranges_[drop].begin <= prefix_) {
    prefix_ = std::max(prefix_, ranges_[drop].end);
    ++drop;
  }
  ranges_.erase(ranges_.begin(), ranges_.begin() + static_cast<std::ptrdiff_t>(drop));
  Reindex();
}

void ConsumedSet::Reindex() {
  gap_.resize(ranges_.size());
  len_.resize(ranges_.size() + 1);
  count_ = prefix_;
  len_[0] = 0;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    gap_[i] = ranges_[i].begin - prefix_ - len_[i];
    len_[i + 1] = len_[i] + (ranges_[i].end - ranges_[i].begin);
  }
  count_ += len_[ranges_.size()];
}

bool ConsumedSet::Contains(uint64_t begin, uint64_t end) const {
  if (begin >= end) return true;
  if (end <= prefix_) return true;
  if (begin < prefix_) return false;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), begin,
                             [](uint64_t v, const PosRange& r) { return v < r.begin; });
  if (it == ranges_.begin()) return false;
  --it;
  return it->begin <= begin && end <= it->end;
}

void ConsumedSet::Add(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  // Appending at or past the end (the common case) stays O(1) amortized.
  if (begin == this->end() && ranges_.empty()) {
    prefix_ = end;
    count_ = end;
    return;
  }
  if (begin == this->end()) {
    ranges_.back().end = end;
    len_.back() += end - begin;
    count_ += end - begin;
    return;
  }
  if (begin > this->end()) {
    ranges_.push_back({begin, end});
    gap_.push_back(begin - prefix_ - len_.back());
    len_.push_back(len_.back() + (end - begin));
    count_ += end - begin;
    return;
  }
  std::vector<PosRange> all = ranges_;
  all.push_back({begin, end});
  *this = ConsumedSet(prefix_, std::move(all), order_world_);
}

uint64_t ConsumedSet::Unconsumed(uint64_t u) const {
  // k = ranges lying wholly before the answer: those with gap_ <= u.
  const size_t k =
      static_cast<size_t>(std::upper_bound(gap_.begin(), gap_.end(), u) - gap_.begin());
  return prefix_ + u + len_[k];
}

void ConsumedSet::AddUnconsumedOf(const ConsumedSet& base, uint64_t first, uint64_t last) {
  while (first < last) {
    const size_t k = static_cast<size_t>(
        std::upper_bound(base.gap_.begin(), base.gap_.end(), first) - base.gap_.begin());
    const uint64_t at = base.prefix_ + first + base.len_[k];
    // Unconsumed positions run on until base's next range.
    uint64_t run = last - first;
    if (k < base.ranges_.size()) run = std::min(run, base.ranges_[k].begin - at);
    Add(at, at + run);
    first += run;
  }
}

ConsumedSet ConsumedSet::Union(const ConsumedSet& a, const ConsumedSet& b) {
  std::vector<PosRange> all = a.ranges_;
  all.insert(all.end(), b.ranges_.begin(), b.ranges_.end());
  all.push_back({0, b.prefix_});
  return ConsumedSet(a.prefix_, std::move(all), a.order_world_ ? a.order_world_ : b.order_world_);
}

void AddRankBatches(ConsumedSet& out, const ConsumedSet& base, const SegmentLayout& l, int rank,
                    uint64_t first_batches, const std::vector<uint64_t>& ahead) {
  ConsumedSet mine;
  if (l.contiguous) {
    const PosRange run = {l.BatchU(rank, 0).begin,
                          first_batches ? l.BatchU(rank, first_batches - 1).end : 0};
    if (first_batches) mine.AddUnconsumedOf(base, run.begin, run.end);
  } else {
    for (uint64_t k = 0; k < first_batches; ++k) {
      const PosRange u = l.BatchU(rank, k);
      mine.AddUnconsumedOf(base, u.begin, u.end);
    }
  }
  for (uint64_t k : ahead) {
    const PosRange u = l.BatchU(rank, k);
    mine.AddUnconsumedOf(base, u.begin, u.end);
  }
  out = ConsumedSet::Union(out, mine);
}

void AddLockstep(ConsumedSet& out, const ConsumedSet& base, const SegmentLayout& l,
                 uint64_t batches) {
  ConsumedSet all;
  if (l.contiguous) {
    for (int r = 0; r < l.world && batches > 0; ++r) {
      all.AddUnconsumedOf(base, l.BatchU(r, 0).begin, l.BatchU(r, batches - 1).end);
    }
  } else {
    const uint64_t end = std::min(l.real, batches * static_cast<uint64_t>(l.world) * l.batch);
    all.AddUnconsumedOf(base, 0, end);
  }
  out = ConsumedSet::Union(out, all);
}

uint64_t SegmentLayout::batches_per_rank() const {
  if (real == 0) return 0;
  const uint64_t step = static_cast<uint64_t>(world) * batch;
  return pad ? (real + step - 1) / step : real / step;
}

uint64_t SegmentLayout::RunBegin(int rank) const {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(real) * static_cast<unsigned>(rank) /
                               static_cast<unsigned>(world));
}

std::optional<uint64_t> SegmentLayout::UIndex(int rank, uint64_t p) const {
  if (contiguous) {
    const uint64_t begin = RunBegin(rank), len = RunBegin(rank + 1) - begin;
    if (p < len) return begin + p;
    return std::nullopt;
  }
  const uint64_t u =
      ((p / batch) * static_cast<uint64_t>(world) + static_cast<uint64_t>(rank)) * batch +
      p % batch;
  if (u < real) return u;
  return std::nullopt;
}

uint64_t SegmentLayout::PaddingSlot(int rank, uint64_t p) const {
  if (contiguous) {
    const uint64_t len = RunBegin(rank + 1) - RunBegin(rank);
    return (p - len) * static_cast<uint64_t>(world) + static_cast<uint64_t>(rank);
  }
  const uint64_t u =
      ((p / batch) * static_cast<uint64_t>(world) + static_cast<uint64_t>(rank)) * batch +
      p % batch;
  return u - real;
}

PosRange SegmentLayout::BatchU(int rank, uint64_t k) const {
  if (contiguous) {
    const uint64_t begin = RunBegin(rank), len = RunBegin(rank + 1) - begin;
    return {begin + std::min(k * batch, len), begin + std::min(k * batch + batch, len)};
  }
  const uint64_t first = (k * static_cast<uint64_t>(world) + static_cast<uint64_t>(rank)) * batch;
  return {std::min(first, real), std::min(first + batch, real)};
}

}  // namespace sluice::runtime
