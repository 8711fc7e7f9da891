// Reads the checked-in decoder fixtures under tests/data/ (see the generate.py
// scripts there).
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace sluice::runtime::testing {

// The bytes of tests/data/<relative>; empty if the file cannot be read.
inline std::vector<uint8_t> ReadFixture(const std::string& relative) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/tests/data/" + relative, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace sluice::runtime::testing
