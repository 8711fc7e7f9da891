// A stateless pseudorandom permutation of [0, n), keyed by (seed, epoch).
//
// Permute(i) is a bijection on [0, n) computed in O(1) memory: a balanced
// 8-round Feistel network on the smallest even number of bits 2h with
// 4^h >= n, with cycle walking (re-applying the network until the value lands
// below n). The domain is at most 4n (for n >= 2), so a call takes fewer than
// 4 network evaluations on average. Same (n, seed, epoch) -> same permutation
// on every machine and build.
#pragma once

#include <array>
#include <cstdint>

namespace sluice::runtime {

class IndexPermutation {
 public:
  IndexPermutation(uint64_t n, uint64_t seed, uint64_t epoch);

  uint64_t size() const { return n_; }
  // The image of i; requires i < size().
  uint64_t Permute(uint64_t i) const;

 private:
  static constexpr int kRounds = 8;
  uint64_t Network(uint64_t x) const;

  uint64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  std::array<uint64_t, kRounds> keys_;
};

// splitmix64's finalizer: a fixed bijective 64-bit mixer.
uint64_t Mix64(uint64_t x);

}  // namespace sluice::runtime
