// SetStagedLayout: edits a plan.json's "memory" section the way the compiler's
// memory_planning pass writes it for a chain split for the GPU: batch field
// `field` holds uint8 staging images of `staging_bytes` each in the staged
// layout; every field's block is 64-byte aligned, the buffer at least 64 bytes.
// For loader_config_test.cc, which also builds without the compiler
// (SLUICE_TESTS_NO_COMPILER) and so cannot call the pass's LayOutBatch, as
// gpu_plan_util.h does. Header-only, no compiler needed.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string>

namespace sluice::testing_gpu {

inline void SetStagedLayout(nlohmann::json& plan, const std::string& field,
                            int64_t staging_bytes) {
  nlohmann::json& m = plan["memory"];
  const int64_t batch = m["batch_size"].get<int64_t>();
  int64_t staged = 0;
  for (nlohmann::json& f : m["fields"]) {
    if (f["field"] == field) f["staging_bytes_per_sample"] = staging_bytes;
    const int64_t staging = f["staging_bytes_per_sample"].get<int64_t>();
    const int64_t per_sample = staging > 0 ? staging : f["bytes_per_sample"].get<int64_t>();
    f["staged_offset"] = staged;
    staged = (staged + per_sample * batch + 63) / 64 * 64;
  }
  m["staged_batch_bytes"] = std::max<int64_t>(staged, 64);
}

}  // namespace sluice::testing_gpu
