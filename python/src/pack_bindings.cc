// Bindings for `sluice.pack` (python/sluice/datasets.py): `sluice pack` from
// Python. Errors are raised here (errors.h): a spec input's mistakes as one
// SpecError with every diagnostic's file:line:col (like sluice.compile), the
// others by RaiseError. The GIL is released while packing.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include "compiler/spec/diagnostics.h"
#include "compiler/spec/spec.h"
#include "pack/pack_input.h"
#include "pack/packer.h"
#include "python/src/errors.h"
#include "runtime/sources/source_registry.h"
#include "runtime/sources/tar/index_store.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

py::dict Pack(const std::string& spec_or_source, const std::string& out_dir,
              const std::string& shard_size, int max_side, int quality, bool restart_markers,
              int threads, const std::map<std::string, std::string>& vars) {
  Result<runtime::PackSummary> summary = MakeError(ErrorCode::kInternal, "pack did not run");
  {
    py::gil_scoped_release release;
    summary = [&]() -> Result<runtime::PackSummary> {
      auto bytes = runtime::ParseByteSize(shard_size);
      if (!bytes) return std::unexpected(bytes.error());
      auto input = runtime::ResolvePackInput(spec_or_source, vars);
      if (!input) return std::unexpected(input.error());
      auto source = runtime::OpenSource(input->format, input->params);
      if (!source) return std::unexpected(source.error());
      runtime::PackOptions options;
      options.out_dir = out_dir;
      options.shard_size = *bytes;
      options.max_side = max_side;
      options.quality = quality;
      options.restart_markers = restart_markers;
      options.threads = threads;
      options.source_format = input->format;
      options.source_path = runtime::SourceParamString(input->params, "path", "");
      return runtime::PackSource(**source, options);
    }();
  }
  if (!summary) {
    // ResolvePackInput renders a spec's diagnostics into one message without
    // a position; the spec is read again for them one by one.
    if (summary.error().code == ErrorCode::kInvalidSpec) {
      std::vector<Error> diagnostics;
      {
        py::gil_scoped_release release;
        Diagnostics diags;
        ParseSpecFile(spec_or_source, diags);
        diagnostics = diags.errors();
      }
      if (!diagnostics.empty()) RaiseDiagnostics(diagnostics);
    }
    RaiseError(summary.error());
  }
  py::dict d;
  d["samples"] = summary->samples;
  d["skipped"] = summary->skipped;
  d["resized"] = summary->resized;
  d["bytes"] = summary->bytes;
  d["shards"] = summary->shards;
  d["index"] = runtime::tar::kPackIndexName;
  d["manifest"] = runtime::kPackManifestFile;
  return d;
}

}  // namespace

void BindPack(py::module_& m) {
  m.def("pack", &Pack, py::arg("spec_or_source"), py::arg("out_dir"), py::arg("shard_size"),
        py::arg("max_side"), py::arg("quality"), py::arg("restart_markers"), py::arg("threads"),
        py::arg("vars"));
}

}  // namespace sluice::python
