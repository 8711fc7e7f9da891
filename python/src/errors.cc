// Python exceptions from sluice::Error values (errors.h).
#include "python/src/errors.h"

#include <algorithm>
#include <string>
#include <vector>

namespace py = pybind11;

namespace sluice::python {
namespace {

struct ErrorClasses {
  PyObject* base = nullptr;  // SluiceError
  PyObject* by_code[8] = {};
  PyObject* diagnostic = nullptr;  // sluice.Diagnostic (a named tuple)
};
ErrorClasses g_errors;

PyObject* NewErrorClass(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("sluice.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

// sluice.Diagnostic: a named tuple, so that an exception carrying a list of
// them pickles (Ray sends exceptions between processes) and compares by value.
PyObject* NewDiagnosticClass(py::module_& m) {
  py::object type =
      py::module_::import("collections")
          .attr("namedtuple")("Diagnostic",
                              py::make_tuple("code", "message", "hint", "file", "line", "column"),
                              py::arg("module") = "sluice");
  type.attr("__doc__") =
      "One spec diagnostic: code (the ErrorCode name), message, hint (may be empty), file, "
      "line and column (1-based; 0 when the error has no position).";
  m.add_object("Diagnostic", type);
  return type.release().ptr();  // kept for the life of the process, like the classes
}

py::object DiagnosticFrom(const Error& e) {
  return py::reinterpret_borrow<py::object>(g_errors.diagnostic)(
      ErrorCodeName(e.code), TextFrom(e.message), TextFrom(e.hint), TextFrom(e.mark.file),
      e.mark.line, e.mark.column);
}

// Raises the class for head.code with str() `text`, head's fields and the
// list `all` as `diagnostics`.
[[noreturn]] void Raise(const Error& head, const std::string& text,
                        const std::vector<const Error*>& all) {
  int code = static_cast<int>(head.code);
  PyObject* cls =
      (code >= 0 && code < 8 && g_errors.by_code[code]) ? g_errors.by_code[code] : g_errors.base;
  py::object exc = py::reinterpret_borrow<py::object>(cls)(TextFrom(text));
  exc.attr("code") = ErrorCodeName(head.code);
  exc.attr("message") = TextFrom(head.message);
  exc.attr("hint") = TextFrom(head.hint);
  exc.attr("file") = TextFrom(head.mark.file);
  exc.attr("line") = head.mark.line;
  exc.attr("column") = head.mark.column;
  py::list diagnostics;
  for (const Error* e : all) diagnostics.append(DiagnosticFrom(*e));
  exc.attr("diagnostics") = diagnostics;
  PyErr_SetObject(cls, exc.ptr());
  throw py::error_already_set();
}

}  // namespace

py::str TextFrom(const std::string& text) {
  PyObject* str =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (str == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(str);
}

void RegisterErrors(py::module_& m) {
  g_errors.base = NewErrorClass(m, "SluiceError", PyExc_RuntimeError,
                                "Base of every Sluice error. Attributes: code (the C++ "
                                "ErrorCode name), message, hint, file, line, column, and "
                                "diagnostics (a list of sluice.Diagnostic; for a SpecError "
                                "every mistake of the spec, the others hold one entry).");
  auto sub = [&](const char* name, PyObject* extra, const char* doc) {
    PyObject* bases =
        extra ? PyTuple_Pack(2, g_errors.base, extra) : PyTuple_Pack(1, g_errors.base);
    PyObject* cls = NewErrorClass(m, name, bases, doc);
    Py_DECREF(bases);
    return cls;
  };
  PyObject* spec = sub("SpecError", PyExc_ValueError,
                       "The spec is malformed; the text lists every mistake as file:line:col, "
                       "e.diagnostics lists them, and message, hint, file, line, column are "
                       "the first one's.");
  PyObject* arg = sub("InvalidArgumentError", PyExc_ValueError, "A bad value was passed.");
  PyObject* nf = sub("NotFoundError", nullptr, "A file, op or symbol does not exist.");
  PyObject* io = sub("IoError", nullptr, "Reading or writing failed.");
  PyObject* corrupt = sub("CorruptDataError", nullptr, "Data could not be decoded.");
  PyObject* unsup =
      sub("UnsupportedError", PyExc_NotImplementedError, "Valid request, not available here.");
  PyObject* version =
      sub("VersionMismatchError", nullptr, "An artifact was made by an incompatible version.");
  PyObject* internal = sub("InternalError", nullptr, "A broken invariant inside Sluice.");
  PyObject** t = g_errors.by_code;
  t[static_cast<int>(ErrorCode::kInvalidSpec)] = spec;
  t[static_cast<int>(ErrorCode::kInvalidArgument)] = arg;
  t[static_cast<int>(ErrorCode::kNotFound)] = nf;
  t[static_cast<int>(ErrorCode::kIo)] = io;
  t[static_cast<int>(ErrorCode::kCorruptData)] = corrupt;
  t[static_cast<int>(ErrorCode::kUnsupported)] = unsup;
  t[static_cast<int>(ErrorCode::kVersionMismatch)] = version;
  t[static_cast<int>(ErrorCode::kInternal)] = internal;
  g_errors.diagnostic = NewDiagnosticClass(m);
}

[[noreturn]] void RaiseError(const Error& error) {
  // Rendered diagnostics (Compilation::diagnostics_error, for callers that
  // only have that) already start with their mark: use them as they are.
  const std::string where = error.mark.ToString();
  const std::string text =
      (!where.empty() && error.message.starts_with(where + ":")) ? error.message : error.ToString();
  Raise(error, text, {&error});
}

[[noreturn]] void RaiseDiagnostics(const std::vector<Error>& diagnostics) {
  if (diagnostics.empty()) {
    RaiseError(Error{ErrorCode::kInternal, "a spec error without diagnostics"});
  }
  std::vector<const Error*> sorted;
  for (const Error& e : diagnostics) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Error* a, const Error* b) {
    return std::pair(a->mark.line, a->mark.column) < std::pair(b->mark.line, b->mark.column);
  });
  std::string text;
  for (const Error* e : sorted) text += (text.empty() ? "" : "\n") + e->ToString();
  Error head = *sorted.front();
  head.code = ErrorCode::kInvalidSpec;
  Raise(head, text, sorted);
}

}  // namespace sluice::python
