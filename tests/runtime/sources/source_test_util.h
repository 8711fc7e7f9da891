// Test helper for the source tests: a sample's bytes as a string.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/sources/source.h"

namespace sluice::runtime::testing {

// Sample `i` of `src` as a string; a read error fails the calling test (and
// gives "").
inline std::string Contents(const Source& src, size_t i) {
  std::vector<uint8_t> buf;
  auto n = src.Read(i, buf);
  EXPECT_TRUE(n.has_value()) << (n ? "" : n.error().ToString());
  if (!n) return {};
  return std::string(reinterpret_cast<const char*>(buf.data()), *n);
}

}  // namespace sluice::runtime::testing
