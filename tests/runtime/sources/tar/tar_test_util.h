// Test helpers for the tar shard tests: write a shard with tar::Writer, scan a
// file, read and patch files.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/sources/tar/tar_format.h"

namespace sluice::runtime::testing {

inline std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Writes a ustar shard at `path` with (name, content) members in order;
// returns each member's data offset.
inline std::vector<uint64_t> WriteShard(
    const std::string& path, const std::vector<std::pair<std::string, std::string>>& members) {
  std::vector<uint64_t> offsets;
  auto w = tar::Writer::Create(path);
  EXPECT_TRUE(w.has_value()) << (w ? "" : w.error().ToString());
  if (!w) return offsets;
  for (const auto& [name, content] : members) {
    auto off = w->Add(name, Bytes(content));
    EXPECT_TRUE(off.has_value()) << (off ? "" : off.error().ToString());
    offsets.push_back(off ? *off : 0);
  }
  auto size = w->Finish();
  EXPECT_TRUE(size.has_value());
  return offsets;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Recomputes the checksum of the tar header at bytes[header, header + 512).
inline void FixChecksum(std::string& bytes, uint64_t header) {
  std::memset(&bytes[header + 148], ' ', 8);
  unsigned sum = 0;
  for (uint64_t i = 0; i < 512; ++i) sum += static_cast<uint8_t>(bytes[header + i]);
  std::snprintf(&bytes[header + 148], 8, "%06o", sum);
}

// Scans `path` and collects its members (names, offsets, sizes; head
// dropped). The scan's status is returned through `status`.
inline std::vector<tar::Member> ScanFile(const std::string& path, Status* status = nullptr,
                                         tar::ScanStop* stop = nullptr) {
  std::vector<tar::Member> members;
  int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return members;
  struct stat st;
  ::fstat(fd, &st);
  Status s = tar::ScanArchive(
      fd, static_cast<uint64_t>(st.st_size), "shard.tar",
      [&](const tar::Member& m) {
        tar::Member copy = m;
        copy.head = {};
        members.push_back(std::move(copy));
        return Ok();
      },
      stop);
  ::close(fd);
  if (status != nullptr) {
    *status = s;
  } else {
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
  }
  return members;
}

}  // namespace sluice::runtime::testing
