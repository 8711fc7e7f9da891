// Errors as values for every Sluice API.
//
// Contract: a fallible function returns Result<T> (a std::expected). The error
// carries a code, a one-line message, an optional hint saying how to fix it,
// and, for errors about a spec, the source mark (file:line:col) it refers to.
// No exception crosses a thread, a TBB task or the C ABI; callers branch on the
// value instead.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace sluice {

enum class ErrorCode {
  kInvalidSpec,      // the spec is malformed or inconsistent
  kInvalidArgument,  // a caller passed a bad value
  kNotFound,         // a file, op or symbol does not exist
  kIo,               // reading or writing failed
  kCorruptData,      // a sample could not be decoded
  kUnsupported,      // valid request, not built (yet) or not available here
  kVersionMismatch,  // an artifact was made by an incompatible version
  kInternal,         // a broken invariant inside Sluice
};

const char* ErrorCodeName(ErrorCode code);

// A position in a source file. Line and column are 1-based; line 0 = no mark.
struct SourceMark {
  std::string file;
  int line = 0;
  int column = 0;

  bool valid() const { return line > 0; }
  // "file:line:col", or just "file" (or "") when there is no line.
  std::string ToString() const;
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::string hint;  // how to fix it; may be empty
  SourceMark mark;   // where; may be invalid

  // "file:line:col: error: message" plus "\n  hint: ..." when there is a hint.
  std::string ToString() const;
};

template <class T>
using Result = std::expected<T, Error>;
using Status = Result<void>;

inline std::unexpected<Error> MakeError(ErrorCode code, std::string message,
                                        std::string hint = {}, SourceMark mark = {}) {
  return std::unexpected<Error>(
      Error{code, std::move(message), std::move(hint), std::move(mark)});
}

inline Status Ok() { return {}; }

}  // namespace sluice

// Propagates an error from an expression returning Result<...>.
#define SLUICE_RETURN_IF_ERROR(expr)                              \
  do {                                                            \
    if (auto sluice_status_ = (expr); !sluice_status_) {          \
      return std::unexpected(std::move(sluice_status_).error());  \
    }                                                             \
  } while (0)
