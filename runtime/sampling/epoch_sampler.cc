#include "runtime/sampling/epoch_sampler.h"

#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace sluice::runtime {

EpochOrder::EpochOrder(const SamplerConfig& c, uint64_t samples_per_rank, uint64_t epoch)
    : n_(c.num_samples),
      rank_(c.rank),
      world_size_(c.world_size),
      shuffle_(c.order == SampleOrder::kShuffle),
      samples_per_rank_(samples_per_rank),
      perm_(c.num_samples, c.seed, epoch) {}

uint64_t EpochOrder::operator[](uint64_t p) const {
  uint64_t j = GlobalPosition(p);
  if (j >= n_) j %= n_;  // pad: repeat the start of the epoch's order
  return shuffle_ ? perm_.Permute(j) : j;
}

void EpochOrder::Fill(uint64_t first, std::span<uint64_t> out) const {
  for (size_t k = 0; k < out.size(); ++k) out[k] = (*this)[first + k];
}

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
