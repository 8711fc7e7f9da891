// The error form the bindings outside sluice_module.cc return: {"error":
// {"code", "message", "hint"}}, raised by the Python layer through
// _sluice.raise_error (the module's one conversion point).
#pragma once

#include <pybind11/pybind11.h>

#include "python/src/errors.h"
#include "sluice/result.h"

namespace sluice::python {

inline pybind11::dict ErrorDict(const Error& e) {
  pybind11::dict err;
  err["code"] = ErrorCodeName(e.code);
  err["message"] = TextFrom(e.mark.valid() ? e.mark.ToString() + ": " + e.message : e.message);
  err["hint"] = TextFrom(e.hint);
  pybind11::dict out;
  out["error"] = err;
  return out;
}

}  // namespace sluice::python
