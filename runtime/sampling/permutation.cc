#include "runtime/sampling/permutation.h"

namespace sluice::runtime {

uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

IndexPermutation::IndexPermutation(uint64_t n, uint64_t seed, uint64_t epoch) : n_(n) {
  int bits = 0;
  while (bits < 64 && (uint64_t{1} << bits) < n) ++bits;
  half_bits_ = bits <= 2 ? 1 : (bits + 1) / 2;
  half_mask_ = half_bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << half_bits_) - 1;
  uint64_t k = Mix64(seed + 0x9e3779b97f4a7c15ULL) ^ Mix64(epoch ^ 0x5851f42d4c957f2dULL);
  for (int r = 0; r < kRounds; ++r) {
    k = Mix64(k + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(r + 1));
    keys_[r] = k;
  }
}

uint64_t IndexPermutation::Network(uint64_t x) const {
  uint64_t left = x >> half_bits_;
  uint64_t right = x & half_mask_;
  for (int r = 0; r < kRounds; ++r) {
    uint64_t f = Mix64(right ^ keys_[r]) & half_mask_;
    uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t IndexPermutation::Permute(uint64_t i) const {
  // Cycle walking: the network permutes [0, 4^h); following i's cycle until
  // it re-enters [0, n) restricts it to a permutation of [0, n).
  uint64_t x = i;
  do {
    x = Network(x);
  } while (x >= n_);
  return x;
}

}  // namespace sluice::runtime
