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

}  // namespace sluice::runtime
