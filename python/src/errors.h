// The one place a sluice::Error becomes a Python exception (RaiseError), and
// the exception classes it raises: SluiceError and one subclass per ErrorCode
// (SpecError, InvalidArgumentError, NotFoundError, IoError, CorruptDataError,
// UnsupportedError, VersionMismatchError, InternalError). See the contract in
// sluice_module.cc's file comment.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "sluice/result.h"

namespace sluice::python {

// `text` as a Python str. Names that come from the data (file and tar
// member names, and the messages that quote them) need not be UTF-8: a byte
// that is not valid UTF-8 becomes a `\\xNN` escape instead of raising
// UnicodeDecodeError. Needs the GIL.
pybind11::str TextFrom(const std::string& text);

// Adds SluiceError and its subclasses to `m` (once, at import).
void RegisterErrors(pybind11::module_& m);

// Raises the exception class for error.code, carrying the C++ text
// (ToString()) and the fields code, message, hint, file, line, column.
// Needs the GIL.
[[noreturn]] void RaiseError(const Error& error);

template <class T>
T Unwrap(Result<T> r) {
  if (!r) RaiseError(r.error());
  return std::move(*r);
}
inline void Check(const Status& s) {
  if (!s) RaiseError(s.error());
}

}  // namespace sluice::python
