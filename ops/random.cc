#include "ops/random.h"

namespace sluice {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

// SplitMix64 finalizer: spreads (seed, op id) over the 64-bit key.
uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::array<uint32_t, 4> SampleRng::Philox(std::array<uint32_t, 4> ctr,
                                          std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

SampleRng::SampleRng(uint64_t seed, uint64_t epoch, uint64_t sample, uint32_t op_id) {
  const uint64_t k = Mix64(seed ^ Mix64(op_id + 0x632BE59BD9B4E019ull));
  key_ = {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
  // counter[0] is the draw block index; epoch and sample fill the rest.
  counter_ = {0u, static_cast<uint32_t>(epoch), static_cast<uint32_t>(sample),
              static_cast<uint32_t>(sample >> 32)};
}

uint32_t SampleRng::NextU32() {
  if (used_ == 4) {
    block_ = Philox(counter_, key_);
    ++counter_[0];
    used_ = 0;
  }
  return block_[used_++];
}

double SampleRng::Uniform() { return static_cast<double>(NextU32() >> 8) * (1.0 / 16777216.0); }

int64_t SampleRng::UniformInt(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  const uint64_t wide = (static_cast<uint64_t>(NextU32()) << 32) | NextU32();
  return lo + static_cast<int64_t>(wide % span);
}

}  // namespace sluice
