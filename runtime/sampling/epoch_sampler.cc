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
uint64_t DrawKey(const SamplerConfig& c, uint64_t epoch) {
  return Mix64(Mix64(c.seed ^ 0x243f6a8885a308d3ULL) ^ Mix64(epoch + 0x13198a2e03707344ULL) ^
               Mix64(static_cast<uint64_t>(c.rank) ^ 0xa4093822299f31d0ULL));
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

}  // namespace

EpochOrder::EpochOrder(const SamplerConfig& c, uint64_t samples_per_rank, uint64_t epoch)
    : n_(c.num_samples),
      rank_(c.rank),
      world_size_(c.world_size),
      shuffle_(c.order == SampleOrder::kShuffle),
      samples_per_rank_(samples_per_rank),
      perm_(c.num_samples, c.seed, epoch) {
  if (c.order != SampleOrder::kShardShuffle || samples_per_rank == 0) return;
  const auto w = static_cast<unsigned __int128>(c.world_size);
  const auto begin =
      static_cast<uint64_t>(c.num_samples * static_cast<unsigned __int128>(c.rank) / w);
  const auto end =
      static_cast<uint64_t>(c.num_samples * static_cast<unsigned __int128>(c.rank + 1) / w);
  auto table = std::make_shared<Table>();
  // drop: samples_per_rank <= floor(n / W) <= the slice; pad: the whole slice.
  table->real = std::min(samples_per_rank, end - begin);
  uint64_t steps = table->real;
  uint64_t from = begin, length = end - begin;
  if (steps == 0) {  // pad with an empty slice (n < W): repeat S[r mod n]
    from = static_cast<uint64_t>(c.rank) % c.num_samples;
    length = steps = 1;
  }
  SliceStream stream(c, epoch, from, length);
  const uint64_t key = DrawKey(c, epoch);
  if (c.num_samples <= std::numeric_limits<uint32_t>::max()) {
    ShuffleThroughBuffer(stream, c.shuffle_buffer, key, steps, table->narrow);
  } else {
    ShuffleThroughBuffer(stream, c.shuffle_buffer, key, steps, table->wide);
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

EpochOrder EpochSampler::Epoch(uint64_t epoch) const {
  return EpochOrder(config_, samples_per_rank(), epoch);
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

Result<DistributedEnv> DistributedEnvFromEnvironment() {
  return ParseDistributedEnv(std::getenv("RANK"), std::getenv("WORLD_SIZE"));
}

}  // namespace sluice::runtime
