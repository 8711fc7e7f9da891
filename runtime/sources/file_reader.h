// Whole-file reads into a caller-owned, reused buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/result.h"

namespace sluice::runtime {

// Reads the whole regular file at `path` with open + fstat + pread into
// `buffer`, growing it only when it is smaller than the file (it is never
// shrunk, so a reused buffer stops allocating once it fits the largest file).
// Returns the number of bytes read; buffer[0, n) holds the file. Thread-safe:
// no state is shared between calls.
// Errors: kNotFound (no such file), kIo (not a regular file, permission,
// read failure), each naming the path.
Result<size_t> ReadWholeFile(const std::string& path, std::vector<uint8_t>& buffer);

// A directory that reads are confined to (file_list's root): Read(rel) reads
// only files whose resolved location stays under it. Every component of `rel`
// is resolved by the kernel with openat2(RESOLVE_BENEATH): `..` and symlinks
// are followed while they stay under the directory, and a path that would
// leave it (an absolute path, `..` above it, a symlink whose target lies
// outside, absolute symlinks) is refused. Where openat2 is unavailable
// (kernels before 5.6, or a seccomp filter that denies it) Read falls back to
// realpath() and a prefix check of the result (a narrow race remains there: a
// symlink swapped between the check and the open is followed).
// Thread-safe after Open; move-only; closes its descriptor.
class ConfinedDir {
 public:
  // Opens the directory `dir` ("" = the working directory). Errors:
  // kNotFound / kIo naming it.
  static Result<ConfinedDir> Open(const std::string& dir);
  ConfinedDir(ConfinedDir&& other) noexcept;
  ConfinedDir& operator=(ConfinedDir&& other) noexcept;
  ConfinedDir(const ConfinedDir&) = delete;
  ConfinedDir& operator=(const ConfinedDir&) = delete;
  ~ConfinedDir();

  // Reads the file at `rel` (relative to the directory) as ReadWholeFile does;
  // `shown` names it in messages. Errors: those of ReadWholeFile, and kIo
  // "... resolves outside ..." for a path or symlink that leaves the directory.
  Result<size_t> Read(const char* rel, const std::string& shown,
                      std::vector<uint8_t>& buffer) const;

 private:
  ConfinedDir(int fd, std::string dir, std::string real)
      : fd_(fd), dir_(std::move(dir)), real_(std::move(real)) {}
  int fd_ = -1;
  std::string dir_;   // as given, for messages
  std::string real_;  // realpath of the directory, for the fallback
};

// For tests: when `on`, every ConfinedDir::Read takes the realpath fallback,
// as where openat2 is unavailable (off: openat2 again, where it works).
void UseRealpathFallbackForTesting(bool on);

}  // namespace sluice::runtime
