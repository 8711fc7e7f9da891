// Reads the checked-in decoder fixtures under tests/data/ (see the generate.py
// scripts there).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/decode/decoder.h"

namespace sluice::runtime::testing {

// The bytes of tests/data/<relative>; empty if the file cannot be read.
inline std::vector<uint8_t> ReadFixture(const std::string& relative) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/tests/data/" + relative, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A request for `crop` of an output at least `min_width` x `min_height`.
inline DecodeRequest CropRequest(PixelRect crop, int min_width, int min_height) {
  DecodeRequest request;
  request.crop = crop;
  request.min_width = min_width;
  request.min_height = min_height;
  return request;
}

// Expects `region` to be the whole `width` x `height` image decoded at full
// scale, with `crop` where it asked for it.
inline void ExpectWholeImageDecoded(const DecodedRegion& region, int width, int height,
                                    const PixelRect& crop) {
  EXPECT_EQ(region.scale_denom, 1);
  EXPECT_EQ(region.decoded, (PixelRect{0, 0, width, height}));
  EXPECT_EQ(region.crop_in_buffer, crop);
}

// The CRC-32 (zlib's, as PNG chunks carry) of `n` bytes at `p`, for tests
// that build or damage PNG chunks.
inline uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

}  // namespace sluice::runtime::testing
