#include "sluice/result.h"

namespace sluice {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidSpec: return "invalid_spec";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kCorruptData: return "corrupt_data";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kVersionMismatch: return "version_mismatch";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string SourceMark::ToString() const {
  if (!valid()) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

std::string Error::ToString() const {
  std::string out;
  std::string where = mark.ToString();
  if (!where.empty()) out += where + ": ";
  out += "error: " + message;
  if (!hint.empty()) out += "\n  hint: " + hint;
  return out;
}

}  // namespace sluice
