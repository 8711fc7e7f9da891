// The kernel probes of `sluice profile` (runtime/profile/machine_profiler.h):
// two small built-in specs compiled into temporary plans for this CPU only.
//
//   resample:  decode -> random_resized_crop 224 -> random_flip, uint8 HWC
//   pointwise: the same -> normalize -> layout CHW -> cast float16
//
// The difference of their per-sample kernel times is the pointwise tail's
// cost. Used by the CLI and the Python module (both link the compiler).
#pragma once

#include <memory>
#include <string>

#include "sluice/result.h"

namespace sluice {

struct ProfilePlans {
  std::string dir;  // temporary directory holding both plans
  std::string resample_plan, pointwise_plan;
  // Removes `dir` and everything in it.
  ~ProfilePlans();
  ProfilePlans() = default;
  ProfilePlans(const ProfilePlans&) = delete;
  ProfilePlans& operator=(const ProfilePlans&) = delete;
};

// Compiles both probes for one CPU target (`simd`: sse41 | avx2 | avx512, as
// runtime::BestSimdLevel() reports; no CUDA) into a new temporary directory.
// Errors: kInvalidArgument (unknown simd), the compiler's, kIo.
Result<std::unique_ptr<ProfilePlans>> CompileProfilePlans(const std::string& simd);

// The probe specs' YAML (exposed for tests and docs).
std::string ProfileProbeSpec(bool pointwise);

}  // namespace sluice
