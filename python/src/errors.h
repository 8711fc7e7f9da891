// The one place a sluice::Error becomes a Python exception (RaiseError), and
// the exception classes it raises: SluiceError and one subclass per ErrorCode
// (SpecError, InvalidArgumentError, NotFoundError, IoError, CorruptDataError,
// UnsupportedError, VersionMismatchError, InternalError), and sluice.Diagnostic,
// the named tuple of one diagnostic in e.diagnostics. See the contract in
// sluice_module.cc's file comment.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "sluice/result.h"

namespace sluice::python {

// `text` as a Python str. Names that come from the data (file and tar
// member names, and the messages that quote them) need not be UTF-8: a byte
// that is not valid UTF-8 becomes a `\\xNN` escape instead of raising
// UnicodeDecodeError. Needs the GIL.
pybind11::str TextFrom(const std::string& text);

// Adds SluiceError, its subclasses and Diagnostic to `m` (once, at import).
void RegisterErrors(pybind11::module_& m);

// Raises the exception class for error.code, carrying the C++ text
// (ToString()) and the fields code, message, hint, file, line, column, and
// `diagnostics`: a list holding one sluice.Diagnostic for `error`.
// Needs the GIL.
[[noreturn]] void RaiseError(const Error& error);

// Raises SpecError for a spec's diagnostics (each one Error with its own
// message, hint and mark; none: an InternalError). str(e) is every
// diagnostic's ToString(), in (line, column) order like Diagnostics::Render;
// code, message, hint, file, line, column are the first one's; `diagnostics`
// lists all of them as sluice.Diagnostic named tuples (code, message, hint,
// file, line, column). Needs the GIL.
[[noreturn]] void RaiseDiagnostics(const std::vector<Error>& diagnostics);

template <class T>
T Unwrap(Result<T> r) {
  if (!r) RaiseError(r.error());
  return std::move(*r);
}
inline void Check(const Status& s) {
  if (!s) RaiseError(s.error());
}

}  // namespace sluice::python
