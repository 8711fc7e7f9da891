// Counter-based random numbers keyed by (seed, epoch, sample index, op id).
//
// Every random draw in Sluice comes from here, so a sample's augmentation is a
// pure function of its key: identical across thread counts, CPU or GPU
// placement, and restarts. The generator is Philox4x32-10 (Salmon et al., SC'11):
// the key is (seed mixed with op id), the counter is (epoch, sample, draw#).
// No state is shared; a SampleRng is a few words on the stack.
#pragma once

#include <array>
#include <cstdint>

namespace sluice {

class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t sample, uint32_t op_id);

  // The next 32 random bits; successive calls advance the draw counter.
  uint32_t NextU32();
  // Uniform in [0, 1) with 24 bits of precision (exactly representable in float).
  double Uniform();
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // True with probability p.
  bool Bernoulli(double p) { return Uniform() < p; }
  // Uniform integer in [lo, hi] inclusive (hi >= lo).
  int64_t UniformInt(int64_t lo, int64_t hi);

  // One Philox4x32-10 block; exposed for tests against published vectors.
  static std::array<uint32_t, 4> Philox(std::array<uint32_t, 4> counter,
                                        std::array<uint32_t, 2> key);

 private:
  std::array<uint32_t, 2> key_;
  std::array<uint32_t, 4> counter_;
  std::array<uint32_t, 4> block_{};
  int used_ = 4;  // words of block_ already handed out
};

}  // namespace sluice
