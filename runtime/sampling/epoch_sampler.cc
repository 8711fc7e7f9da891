#include "runtime/sampling/epoch_sampler.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace sluice::runtime {

std::optional<SampleOrder> ParseSampleOrder(std::string_view name) {
  if (name == "shuffle") return SampleOrder::kShuffle;
  if (name == "sequential") return SampleOrder::kSequential;
  if (name == "shard_shuffle") return SampleOrder::kShardShuffle;
  return std::nullopt;
}

namespace {

// Streams rank r's slice of S (see the header): the samples of the shards in
// permuted order, from slice position `begin` for `length` samples.
class SliceStream {
 public:
  SliceStream(const SamplerConfig& c, uint64_t epoch, uint64_t begin, uint64_t length)
      : starts_(c.shard_starts),
        n_(c.num_samples),
        perm_(c.shard_starts.size(), c.seed, epoch),
        left_(length) {
    // Skip the shards wholly before `begin`: O(num_shards) per epoch.
    uint64_t skipped = 0;
    for (shard_pos_ = 0; shard_pos_ < starts_.size(); ++shard_pos_) {
      const uint64_t k = perm_.Permute(shard_pos_);
      const uint64_t size = End(k) - starts_[k];
      if (skipped + size > begin) {
        next_ = starts_[k] + (begin - skipped);
        end_ = End(k);
        break;
      }
      skipped += size;
    }
  }
  bool done() const { return left_ == 0; }
  uint64_t left() const { return left_; }
  // The next sample; requires !done().
  uint64_t Next() {
    while (next_ == end_) {  // the shard is exhausted (or empty): the next one
      const uint64_t k = perm_.Permute(++shard_pos_);
      next_ = starts_[k];
      end_ = End(k);
    }
    --left_;
    return next_++;
  }

 private:
  uint64_t End(uint64_t k) const { return k + 1 < starts_.size() ? starts_[k + 1] : n_; }

  const std::vector<uint64_t>& starts_;
  uint64_t n_;
  IndexPermutation perm_;
  uint64_t left_;
  uint64_t shard_pos_ = 0, next_ = 0, end_ = 0;
};

// The uniform slot draw of output step t: a hash keyed by (seed, epoch, rank).
uint64_t DrawKey(const SamplerConfig& c, uint64_t epoch, int rank) {
  return Mix64(Mix64(c.seed ^ 0x243f6a8885a308d3ULL) ^ Mix64(epoch + 0x13198a2e03707344ULL) ^
               Mix64(static_cast<uint64_t>(rank) ^ 0xa4093822299f31d0ULL));
}
uint64_t Slot(uint64_t key, uint64_t t, uint64_t slots) {
  const uint64_t h = Mix64(key + t * 0x9e3779b97f4a7c15ULL);
  return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * slots) >> 64);
}

// Runs the shuffle buffer over `stream`, writing `steps` outputs into out.
template <typename T>
void ShuffleThroughBuffer(SliceStream& stream, uint64_t buffer, uint64_t key, uint64_t steps,
                          std::vector<T>& out) {
  std::vector<T> slots;
  slots.reserve(static_cast<size_t>(std::min(buffer, stream.left())));
  while (slots.size() < buffer && !stream.done()) slots.push_back(static_cast<T>(stream.Next()));
  out.resize(static_cast<size_t>(steps));
  for (uint64_t t = 0; t < steps; ++t) {
    const uint64_t s = Slot(key, t, slots.size());
    out[t] = slots[s];
    if (!stream.done()) {
      slots[s] = static_cast<T>(stream.Next());
    } else {
      slots[s] = slots.back();
      slots.pop_back();
    }
  }
}

// The first O position of rank r's outputs when O is built for w ranks.
uint64_t RunStart(uint64_t n, int r, int w) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(n) * static_cast<unsigned>(r) /
                               static_cast<unsigned>(w));
}

// shard_shuffle: out[i] = O(want[i].first) for O built for w ranks; `want`
// sorted by position. Replays each rank's buffer whose outputs are wanted, up
// to the last wanted step.
template <typename T>
void OrderValues(const SamplerConfig& c, uint64_t epoch, int w,
                 const std::vector<std::pair<uint64_t, uint64_t>>& want, std::vector<T>& out) {
  const uint64_t n = c.num_samples;
  std::vector<T> replay;
  size_t i = 0;
  while (i < want.size()) {
    const uint64_t j = want[i].first;
    int r = static_cast<int>(static_cast<unsigned __int128>(j) * static_cast<unsigned>(w) / n);
    while (r + 1 < w && RunStart(n, r + 1, w) <= j) ++r;
    while (r > 0 && RunStart(n, r, w) > j) --r;
    const uint64_t begin = RunStart(n, r, w), end = RunStart(n, r + 1, w);
    size_t last = i;
    while (last < want.size() && want[last].first < end) ++last;
    SliceStream stream(c, epoch, begin, end - begin);
    ShuffleThroughBuffer(stream, c.shuffle_buffer, DrawKey(c, epoch, r),
                         want[last - 1].first - begin + 1, replay);
    for (; i < last; ++i) out[want[i].second] = replay[want[i].first - begin];
  }
}

}  // namespace

EpochOrder::EpochOrder(const SamplerConfig& c, const SegmentLayout& layout,
                       std::shared_ptr<const ConsumedSet> base, uint64_t epoch)
    : n_(c.num_samples),
      rank_(c.rank),
      shuffle_(c.order == SampleOrder::kShuffle),
      samples_per_rank_(layout.batches_per_rank() * c.batch_size),
      layout_(layout),
      base_(std::move(base)),
      perm_(c.num_samples, c.seed, epoch) {
  if (c.order != SampleOrder::kShardShuffle || samples_per_rank_ == 0) return;
  const int w = base_->order_world() > 0 ? base_->order_world() : c.world_size;
  // (O position, local position) of every slot. The real run is ascending in
  // a fresh epoch (O(n / W)); padding, or a run across holes, is sorted apart
  // and looked up with a second replay.
  std::vector<std::pair<uint64_t, uint64_t>> want(static_cast<size_t>(samples_per_rank_));
  for (uint64_t p = 0; p < samples_per_rank_; ++p) want[p] = {Position(p), p};
  const auto split = std::is_sorted_until(want.begin(), want.end());
  std::vector<std::pair<uint64_t, uint64_t>> rest(split, want.end());
  want.erase(split, want.end());
  std::sort(rest.begin(), rest.end());
  auto table = std::make_shared<Table>();
  if (c.num_samples <= std::numeric_limits<uint32_t>::max()) {
    table->narrow.resize(static_cast<size_t>(samples_per_rank_));
    OrderValues(c, epoch, w, want, table->narrow);
    OrderValues(c, epoch, w, rest, table->narrow);
  } else {
    table->wide.resize(static_cast<size_t>(samples_per_rank_));
    OrderValues(c, epoch, w, want, table->wide);
    OrderValues(c, epoch, w, rest, table->wide);
  }
  table_ = std::move(table);
}

void EpochOrder::Fill(uint64_t first, std::span<uint64_t> out) const {
  for (size_t k = 0; k < out.size(); ++k) out[k] = (*this)[first + k];
}

namespace {

Status CheckShardConfig(const SamplerConfig& c) {
  if (c.shuffle_buffer == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "shuffle_buffer must be >= 1");
  }
  if (c.num_samples == 0) return Ok();
  const std::vector<uint64_t>& s = c.shard_starts;
  if (s.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "order shard_shuffle needs the shard starts of a sharded source");
  }
  if (s[0] != 0) return MakeError(ErrorCode::kInvalidArgument, "the first shard must start at 0");
  for (size_t k = 1; k < s.size(); ++k) {
    if (s[k] < s[k - 1] || s[k] > c.num_samples) {
      return MakeError(ErrorCode::kInvalidArgument, "shard " + std::to_string(k) + " starts at " +
                                                        std::to_string(s[k]) + ", not in [" +
                                                        std::to_string(s[k - 1]) + ", " +
                                                        std::to_string(c.num_samples) + "]");
    }
  }
  return Ok();
}

}  // namespace

Result<EpochSampler> EpochSampler::Create(const SamplerConfig& c) {
  if (c.batch_size == 0) return MakeError(ErrorCode::kInvalidArgument, "batch_size must be >= 1");
  if (c.world_size < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "world_size must be >= 1, got " + std::to_string(c.world_size));
  }
  if (c.rank < 0 || c.rank >= c.world_size) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "rank " + std::to_string(c.rank) + " is outside [0, " + std::to_string(c.world_size) + ")");
  }
  if (c.order == SampleOrder::kShardShuffle) SLUICE_RETURN_IF_ERROR(CheckShardConfig(c));
  const uint64_t per_step = static_cast<uint64_t>(c.world_size) * c.batch_size;
  if (per_step / c.batch_size != static_cast<uint64_t>(c.world_size)) {
    return MakeError(ErrorCode::kInvalidArgument, "world_size * batch_size overflows");
  }
  uint64_t batches = c.remainder == Remainder::kDrop ? c.num_samples / per_step
                                                     : (c.num_samples + per_step - 1) / per_step;
  if (c.num_samples == 0) batches = 0;  // nothing to pad with
  return EpochSampler(c, batches);
}

SegmentLayout EpochSampler::Layout(const ConsumedSet& consumed) const {
  SegmentLayout l;
  l.real = config_.num_samples - std::min(config_.num_samples, consumed.count());
  l.batch = config_.batch_size;
  l.world = config_.world_size;
  l.contiguous = config_.order == SampleOrder::kShardShuffle;
  l.pad = config_.remainder == Remainder::kPad;
  return l;
}

EpochOrder EpochSampler::Segment(uint64_t epoch, const ConsumedSet& consumed) const {
  return EpochOrder(config_, Layout(consumed), std::make_shared<const ConsumedSet>(consumed),
                    epoch);
}

SamplerPosition EpochSampler::Advance(SamplerPosition at, uint64_t count) const {
  const uint64_t per_epoch = samples_per_rank();
  if (per_epoch == 0) return at;
  uint64_t offset = at.position + count;  // position < per_epoch, so no overflow in practice
  return SamplerPosition{at.epoch + offset / per_epoch, offset % per_epoch};
}

namespace {

Result<int> ParseEnvInt(const char* name, const char* value) {
  std::string_view s(value);
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < 0) {
    return MakeError(ErrorCode::kInvalidArgument, std::string("environment variable ") + name +
                                                      "='" + value +
                                                      "' is not a non-negative integer");
  }
  return v;
}

}  // namespace

Result<DistributedEnv> ParseDistributedEnv(const char* rank, const char* world_size) {
  if (rank == nullptr && world_size == nullptr) return DistributedEnv{};
  if (rank == nullptr || world_size == nullptr) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("environment sets ") + (rank ? "RANK" : "WORLD_SIZE") +
                         " but not " + (rank ? "WORLD_SIZE" : "RANK"),
                     "set both (torchrun does) or neither");
  }
  auto r = ParseEnvInt("RANK", rank);
  if (!r) return std::unexpected(r.error());
  auto w = ParseEnvInt("WORLD_SIZE", world_size);
  if (!w) return std::unexpected(w.error());
  if (*w < 1) return MakeError(ErrorCode::kInvalidArgument, "WORLD_SIZE must be >= 1");
  if (*r >= *w) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "RANK=" + std::to_string(*r) + " is not below WORLD_SIZE=" + std::to_string(*w));
  }
  return DistributedEnv{*r, *w};
}

Result<int> ParseLocalRank(const char* local_rank) {
  if (local_rank == nullptr) return 0;
  return ParseEnvInt("LOCAL_RANK", local_rank);
}

Result<DistributedEnv> DistributedEnvFromEnvironment() {
  return ParseDistributedEnv(std::getenv("RANK"), std::getenv("WORLD_SIZE"));
}

}  // namespace sluice::runtime
