// Shared check for the sampler tests: resuming from a saved position, with a
// fresh sampler, continues the uninterrupted stream exactly.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "runtime/sampling/epoch_sampler.h"

namespace sluice::runtime {

// Builds the uninterrupted stream of `epochs` epochs of `c` (IndexAt and
// Advance by 1), then for each k in `resume_at` creates a fresh sampler,
// advances it k samples from the start and expects (epoch, position) =
// (k / per_epoch, k % per_epoch) and the rest of the stream, both through
// IndexAt and through the epoch's EpochOrder.
inline void ExpectResumeContinues(const SamplerConfig& c, std::initializer_list<uint64_t> resume_at,
                                  uint64_t epochs = 3) {
  auto s = EpochSampler::Create(c);
  ASSERT_TRUE(s.has_value());
  const uint64_t per_epoch = s->samples_per_rank();
  std::vector<uint64_t> stream;
  SamplerPosition at;
  for (uint64_t k = 0; k < epochs * per_epoch; ++k) {
    stream.push_back(s->IndexAt(at));
    at = s->Advance(at, 1);
  }
  EXPECT_EQ(at, (SamplerPosition{epochs, 0}));
  for (uint64_t k : resume_at) {
    auto fresh = EpochSampler::Create(c);
    ASSERT_TRUE(fresh.has_value());
    SamplerPosition resume = fresh->Advance(SamplerPosition{}, k);
    EXPECT_EQ(resume.epoch, k / per_epoch) << "resumed at " << k;
    EXPECT_EQ(resume.position, k % per_epoch) << "resumed at " << k;
    EpochOrder o = fresh->Epoch(resume.epoch);
    for (uint64_t m = k; m < stream.size(); ++m) {
      if (resume.position == 0 && m != k) o = fresh->Epoch(resume.epoch);
      ASSERT_EQ(fresh->IndexAt(resume), stream[m]) << "resumed at " << k;
      ASSERT_EQ(o[resume.position], stream[m]) << "resumed at " << k;
      resume = fresh->Advance(resume, 1);
    }
  }
}

}  // namespace sluice::runtime
