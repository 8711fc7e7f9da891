// Python exceptions from sluice::Error values (errors.h).
#include "python/src/errors.h"

#include <string>

namespace py = pybind11;

namespace sluice::python {
namespace {

struct ErrorClasses {
  PyObject* base = nullptr;  // SluiceError
  PyObject* by_code[8] = {};
};
ErrorClasses g_errors;

PyObject* NewErrorClass(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("sluice.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

}  // namespace

py::str TextFrom(const std::string& text) {
  PyObject* str = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()),
                                       "backslashreplace");
  if (str == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(str);
}

void RegisterErrors(py::module_& m) {
  g_errors.base = NewErrorClass(m, "SluiceError", PyExc_RuntimeError,
                                "Base of every Sluice error. Attributes: code (the C++ "
                                "ErrorCode name), message, hint, file, line, column.");
  auto sub = [&](const char* name, PyObject* extra, const char* doc) {
    PyObject* bases =
        extra ? PyTuple_Pack(2, g_errors.base, extra) : PyTuple_Pack(1, g_errors.base);
    PyObject* cls = NewErrorClass(m, name, bases, doc);
    Py_DECREF(bases);
    return cls;
  };
  PyObject* spec = sub("SpecError", PyExc_ValueError,
                       "The spec is malformed; the text lists every mistake as file:line:col.");
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
}

[[noreturn]] void RaiseError(const Error& error) {
  int code = static_cast<int>(error.code);
  PyObject* cls =
      (code >= 0 && code < 8 && g_errors.by_code[code]) ? g_errors.by_code[code] : g_errors.base;
  // Rendered diagnostics (a spec's every mistake, see SpecErrorFrom) already
  // start with their mark: use them as they are.
  const std::string where = error.mark.ToString();
  const std::string text =
      (!where.empty() && error.message.starts_with(where + ":")) ? error.message : error.ToString();
  py::object exc = py::reinterpret_borrow<py::object>(cls)(TextFrom(text));
  exc.attr("code") = ErrorCodeName(error.code);
  exc.attr("message") = TextFrom(error.message);
  exc.attr("hint") = TextFrom(error.hint);
  exc.attr("file") = TextFrom(error.mark.file);
  exc.attr("line") = error.mark.line;
  exc.attr("column") = error.mark.column;
  PyErr_SetObject(cls, exc.ptr());
  throw py::error_already_set();
}

}  // namespace sluice::python
