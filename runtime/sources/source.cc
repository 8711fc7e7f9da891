#include "runtime/sources/source.h"

#include "runtime/sources/file_reader.h"

namespace sluice::runtime {

Result<size_t> LocalFileSource::Read(size_t i, std::vector<uint8_t>& buffer) const {
  if (i >= size()) {
    return MakeError(ErrorCode::kInvalidArgument, "sample index " + std::to_string(i) +
                                                      " out of range (size " +
                                                      std::to_string(size()) + ")");
  }
  return ReadWholeFile(path(i), buffer);
}

}  // namespace sluice::runtime
