// sluice._sluice: the Python bindings (pybind11) behind the `sluice` package.
//
// What it exposes (python/sluice/__init__.py wraps it into the public API):
//   compile_spec(spec, out, cpu_targets, cuda, profile, cpu_budget)
//                                               spec file or text -> plan directory
//   Plan.load(path, vars)                       sluice::Plan::Load
//   Loader(plan, options...)                    sluice::Loader; iterating yields
//                                               dicts {field: Tensor} for one epoch
//   Tensor                                      one batch field: __dlpack__,
//                                               __dlpack_device__, __array_interface__
//                                               (host fields only)
//   SluiceError and its subclasses              raised from sluice::Error values
//   Diagnostic                                  one entry of e.diagnostics
//
// Contracts:
// - Errors: every sluice::Error becomes a Python exception in exactly one place,
//   RaiseError() (errors.h); the exception class follows the ErrorCode and carries
//   the C++ text (ToString(): "file:line:col: error: message" plus the hint) and
//   the fields code, message, hint, file, line, column, diagnostics. A spec's
//   diagnostics (compile, pack) are raised by RaiseDiagnostics: one SpecError
//   whose fields are the first mistake's and whose `diagnostics` lists all.
// - The GIL is released while compiling and while Loader::Next waits for a
//   batch. A Loader is used by one Python thread at a time (a mutex serializes
//   calls that arrive from several).
// - Lifetime (tensor.h): a Tensor holds a shared_ptr to its Batch; so does every DLPack
//   capsule or numpy array made from it (numpy keeps the Tensor as its base).
//   The batch buffer returns to the loader's pool when the last of them is
//   gone. A Batch may outlive its Loader (see include/sluice/batch.h).
// - Device tensors (GPU path, docs/gpu.md): __dlpack_device__ is (kDLCUDA = 2,
//   ordinal) and __dlpack__ exports the device pointer. Per the DLPack stream
//   protocol, __dlpack__(stream=S) makes the consumer's stream S wait on the
//   batch's CUDA event (no host sync); stream=None synchronizes the host on the
//   event; stream=-1 does neither. __array_interface__ raises for them (numpy
//   would read device memory).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/hardware_profile.h"
#include "compiler/driver/compilation_internal.h"
#include "python/src/errors.h"
#include "python/src/state_bindings.h"
#include "python/src/tensor.h"
#include "runtime/plan/plan_internal.h"
#include "sluice/compiler.h"
#include "sluice/sluice.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

// ---- compile -----------------------------------------------------------------

// Spec (file path, or YAML text when `is_text`) -> plan directory `out`, with
// an optional hardware profile file and CPU budget for the placement pass
// (like `sluice compile --profile --cpu-budget`), through the compile driver.
// Spec errors fill `diagnostics` (each with its own message, hint and mark;
// raised as one SpecError by RaiseDiagnostics) and return kInvalidSpec.
// Runs without the GIL.
Status CompileSpec(const std::string& spec, bool is_text, const std::string& out,
                   const std::optional<std::vector<std::string>>& cpu_targets,
                   std::optional<bool> cuda, const std::optional<std::string>& profile,
                   std::optional<int> cpu_budget, std::vector<Error>* diagnostics) {
  CompileOptions options;
  if (is_text) {
    options.spec_text = spec;
    options.spec_name = "<string>";
  } else {
    std::error_code ec;
    if (!std::filesystem::exists(spec, ec)) {
      return MakeError(ErrorCode::kNotFound, "no spec file `" + spec + "`",
                       "a spec string is read as YAML text when it has a newline or starts "
                       "with `{` or `sluice:`, else as a file path; check the path, or pass "
                       "the spec's text");
    }
    options.spec_path = spec;  // read by Compile, bounded (compiler/spec/spec_limits.h)
  }
  if (profile) options.profile_path = *profile;
  if (cpu_budget) options.cpu_budget = *cpu_budget;
  if (cpu_targets) options.codegen.cpu_targets = *cpu_targets;
  if (cuda) options.codegen.cuda = *cuda;
  auto compilation = Compile(options);
  if (!compilation) return std::unexpected(compilation.error());
  if (compilation->has_errors()) {
    *diagnostics = compilation->impl().diags.errors();
    return std::unexpected(compilation->diagnostics_error());
  }
  return compilation->WritePlan(out);
}

// ---- params -> Python ----------------------------------------------------------

py::object ToPython(const ParamList& params);

py::object ToPython(const ParamValue& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, ParamList>) {
          return ToPython(x);
        } else {
          return py::cast(x);
        }
      },
      v.value);
}

py::object ToPython(const ParamList& params) {
  py::dict d;
  for (const auto& [k, v] : params) d[py::str(k)] = ToPython(v);
  return d;
}

// ---- loader --------------------------------------------------------------------

bool IsFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

class PyLoader {
 public:
  PyLoader(std::shared_ptr<Plan> plan, Loader loader)
      : plan_(std::move(plan)), loader_(std::move(loader)) {}
  // Shutting the loader down waits for its started workers and cancels its
  // remote requests: done without the GIL, so the process's other Python
  // threads run meanwhile. A loader is often freed by the garbage collector on
  // whatever thread it runs on, such as a server thread the loader's own
  // requests wait for. At interpreter exit the GIL is kept (releasing it then
  // is not allowed).
  ~PyLoader() {
    if (IsFinalizing()) return;
    py::gil_scoped_release release;
    Loader gone = std::move(loader_);
  }

  static constexpr std::chrono::milliseconds kSignalCheckInterval{100};

  // The next batch as {field: Tensor}, or nullopt at the end of the epoch.
  std::optional<py::dict> Next() {
    Result<std::optional<Batch>> next;
    while (true) {
      bool timed_out = false;
      {
        py::gil_scoped_release release;
        std::lock_guard lock(mutex_);
        next = loader_.NextWithin(kSignalCheckInterval, &timed_out);
      }
      if (!timed_out) break;
      // Waiting in slices lets Ctrl-C (KeyboardInterrupt) through while no
      // batch comes (a stalled read, say); nothing is lost: the batch being
      // made is delivered by the next call.
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    if (!next) RaiseError(next.error());
    if (!*next) return std::nullopt;
    auto batch = std::make_shared<const Batch>(std::move(**next));
    py::dict out;
    const auto& fields = batch->fields();
    for (size_t i = 0; i < fields.size(); ++i) out[py::str(fields[i].name)] = MakeTensor(batch, i);
    return out;
  }

  // For __iter__: a `for` begun when every batch of the epoch went out (the
  // loop before stopped after exactly len(loader) batches) runs the next
  // epoch, not an empty one: the pending end is taken here.
  void SkipPendingEpochEnd() {
    bool pending = false;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      pending = loader_.epoch_end_pending();
    }
    if (pending) Next();
  }

  py::dict StateDict() const { return StateToDict(loader_.State()); }

  void Restore(const LoaderState& s) {
    Status st;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      st = loader_.Restore(s);
    }
    Check(st);
  }

  void LoadStateDict(const py::dict& d) { Restore(Unwrap(StateFromDict(d))); }

  void SetEpoch(uint64_t epoch) {
    LoaderState s;
    s.epoch = epoch;
    s.spec_hash = plan_->spec_hash();
    s.samples = loader_.dataset_size();
    s.batch_size = static_cast<uint64_t>(loader_.batch_size());
    Restore(s);
  }

  py::dict Stats() const {
    LoaderStats s = loader_.Stats();
    py::dict d;
    d["samples"] = s.samples;
    d["batches"] = s.batches;
    d["seconds"] = s.seconds;
    d["images_per_second"] = s.images_per_second;
    d["latency_p50"] = s.latency_p50;
    d["latency_p99"] = s.latency_p99;
    d["latency_max"] = s.latency_max;
    d["consumer_wait_seconds"] = s.consumer_wait_seconds;
    d["bad_samples"] = s.bad_samples;  // distinct, each once per epoch
    d["bad_reads"] = s.bad_reads;      // every failed read/decode
    d["skipped"] = s.skipped;
    d["replaced"] = s.replaced;
    py::list bad;
    for (const BadSample& b : s.last_bad)
      bad.append(py::make_tuple(TextFrom(b.path), TextFrom(b.reason)));
    d["last_bad"] = bad;
    d["read_seconds"] = s.read_seconds;
    d["decode_seconds"] = s.decode_seconds;
    d["kernel_seconds"] = s.kernel_seconds;
    d["threads"] = s.threads;
    d["in_flight"] = s.in_flight;
    d["pool_buffers"] = s.pool_buffers;
    d["prefetch"] = s.prefetch;
    d["online_tuning"] = s.online_tuning;
    d["tuner_moves"] = s.tuner_moves;
    d["batch_bytes"] = s.batch_bytes;
    d["device"] = s.device;
    py::list warnings;
    for (const std::string& w : s.warnings) warnings.append(TextFrom(w));
    d["warnings"] = warnings;
    // Remote sources (docs/remote.md); zeros for local ones.
    d["remote"] = s.remote;
    d["remote_requests"] = s.remote_requests;
    d["remote_bytes_fetched"] = s.remote_bytes_fetched;
    d["remote_retries"] = s.remote_retries;
    d["remote_hedges"] = s.remote_hedges;
    d["remote_hedge_wins"] = s.remote_hedge_wins;
    d["remote_timeouts"] = s.remote_timeouts;
    d["remote_failures"] = s.remote_failures;
    d["remote_latency_p50"] = s.remote_latency_p50;
    d["remote_latency_p99"] = s.remote_latency_p99;
    d["cache_hits"] = s.cache_hits;
    d["cache_misses"] = s.cache_misses;
    d["cache_lock_timeouts"] = s.cache_lock_timeouts;
    d["cache_passthrough"] = s.cache_passthrough;
    d["cache_no_space"] = s.cache_no_space;
    d["coalesced_requests"] = s.coalesced_requests;
    d["coalesced_samples"] = s.coalesced_samples;
    d["shards_streamed"] = s.shards_streamed;
    d["read_ahead"] = s.read_ahead;
    d["read_ahead_stalls"] = s.read_ahead_stalls;
    return d;
  }

  // Loader::BadSamples as dicts with the keys of `sluice run --bad-samples`.
  py::list BadSamples(uint64_t epoch) const {
    auto bad = loader_.BadSamples(epoch);
    if (!bad) RaiseError(bad.error());
    py::list out;
    for (const BadSample& b : *bad) {
      py::dict d;
      d["epoch"] = b.epoch;
      d["sample"] = b.index;
      d["name"] = TextFrom(b.path);
      d["reason"] = TextFrom(b.reason);
      out.append(d);
    }
    return out;
  }

  uint64_t batches_per_epoch() const { return loader_.batches_per_epoch(); }
  int64_t batch_size() const { return loader_.batch_size(); }
  size_t dataset_size() const { return loader_.dataset_size(); }

  // Loader::StartTrace / StopTrace (docs/observability.md).
  // Both wait on `mutex_` (another thread may be in next() or drain_native)
  // and do file I/O, so without the GIL: a thread blocked here must not stop
  // the process's other Python threads.
  void StartTrace(const std::string& path, size_t max_events_per_thread) {
    Status st;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      st = loader_.StartTrace(path, max_events_per_thread);
    }
    Check(st);
  }
  uint64_t StopTrace() {
    Result<uint64_t> dropped;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      dropped = loader_.StopTrace();
    }
    return Unwrap(std::move(dropped));
  }

  // C++-side throughput reference for the overhead benchmark: runs Next() for
  // up to `max_batches` batches (or to the end of the epoch) without building
  // Python objects; returns the batch count. GIL released throughout.
  uint64_t DrainNative(uint64_t max_batches) {
    uint64_t n = 0;
    Status err;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      while (n < max_batches) {
        auto next = loader_.Next();
        if (!next) {
          err = std::unexpected(next.error());
          break;
        }
        if (!*next) break;
        ++n;
      }
    }
    Check(err);
    return n;
  }

 private:
  std::shared_ptr<Plan> plan_;
  Loader loader_;
  std::mutex mutex_;
};

}  // namespace
}  // namespace sluice::python

namespace sluice::python {
void BindTuning(pybind11::module_& m);
}  // namespace sluice::python
namespace sluice::python {
void BindPack(pybind11::module_& m);
}  // namespace sluice::python

namespace sluice::python {
namespace {

// compile_spec and raise_error.
void BindFunctions(py::module_& m) {
  m.def(
      "compile_spec",
      [](const std::string& spec, bool is_text, const std::string& out,
         std::optional<std::vector<std::string>> cpu_targets, std::optional<bool> cuda,
         std::optional<std::string> profile, std::optional<int> cpu_budget) {
        Status st;
        std::vector<Error> diagnostics;
        {
          py::gil_scoped_release release;
          st =
              CompileSpec(spec, is_text, out, cpu_targets, cuda, profile, cpu_budget, &diagnostics);
        }
        if (!diagnostics.empty()) RaiseDiagnostics(diagnostics);
        Check(st);
      },
      py::arg("spec"), py::arg("is_text"), py::arg("out"), py::arg("cpu_targets") = py::none(),
      py::arg("cuda") = py::none(), py::arg("profile") = py::none(),
      py::arg("cpu_budget") = py::none(),
      "Compiles a spec (a file path, or YAML text when is_text) into the plan directory `out`, "
      "placed with the hardware profile file `profile` and CPU budget `cpu_budget` when given.");

  m.def(
      "raise_error",
      [](const std::string& code, const std::string& message, const std::string& hint) {
        for (int c = 0; c < 8; ++c) {
          if (code == ErrorCodeName(static_cast<ErrorCode>(c))) {
            RaiseError(Error{static_cast<ErrorCode>(c), message, hint});
          }
        }
        RaiseError(Error{ErrorCode::kInternal, message, hint});
      },
      py::arg("code"), py::arg("message"), py::arg("hint") = "",
      "Raises the SluiceError subclass for `code` (an ErrorCodeName such as \"unsupported\"); "
      "lets the pure-Python layer raise through the same single conversion.");
}

// Plan: load, verify and what a plan says about itself.
void BindPlan(py::module_& m) {
  py::class_<Plan, std::shared_ptr<Plan>>(m, "Plan")
      .def_static(
          "load",
          [](const std::string& path, const PlanVars& vars) {
            std::optional<Result<Plan>> plan;
            {
              py::gil_scoped_release release;
              plan.emplace(Plan::Load(path, vars));
            }
            return std::make_shared<Plan>(Unwrap(std::move(*plan)));
          },
          py::arg("path"), py::arg("vars") = PlanVars{})
      .def_property_readonly("path", &Plan::path)
      .def_property_readonly("name", &Plan::name)
      .def_property_readonly("spec_hash", &Plan::spec_hash)
      .def_property_readonly("compiler_version", &Plan::compiler_version)
      .def_property_readonly("source_format", &Plan::source_format)
      .def_property_readonly("source_params",
                             [](const Plan& p) { return ToPython(p.source_params()); })
      .def_property_readonly("sampling", [](const Plan& p) { return ToPython(p.sampling()); })
      .def_property_readonly("batch", [](const Plan& p) { return ToPython(p.batch()); })
      .def_property_readonly("output", [](const Plan& p) { return ToPython(p.output()); })
      .def_property_readonly("chain_fields", &Plan::chain_fields)
      .def_property_readonly("reference_fields", &Plan::reference_fields)
      .def_property_readonly("reference_reasons", &Plan::reference_reasons)
      .def_property_readonly("cpu_targets", &Plan::cpu_targets)
      .def_property_readonly("cuda_target", &Plan::cuda_target)
      .def_property_readonly("placement_device", &Plan::placement_device)
      .def_property_readonly("decode_op", &Plan::decode_op)
      .def_property_readonly("decode_params",
                             [](const Plan& p) { return ToPython(p.decode_params()); })
      .def_property_readonly("decode_pushdown",
                             [](const Plan& p) {
                               py::dict d;
                               d["roi"] = p.decode_roi_allowed();
                               d["dct_scaling"] = p.decode_dct_scaling_allowed();
                               return d;
                             })
      .def_property_readonly("memory", [](const Plan& p) -> py::object {
        // plan.json "memory" (memory_planning's batch buffer layout), or None.
        if (p.memory() == nullptr) return py::none();
        const PlanMemoryDoc& m = *p.memory();
        py::list fields;
        for (const PlanFieldMemoryDoc& f : m.fields) {
          py::dict d;
          d["field"] = f.field;
          d["dtype"] = std::string(DTypeName(f.dtype));
          d["sample_shape"] = py::tuple(py::cast(f.sample_shape));
          d["bytes_per_sample"] = f.bytes_per_sample;
          d["offset"] = f.offset;
          d["staging_bytes_per_sample"] = f.staging_bytes_per_sample;
          d["staged_offset"] = f.staged_offset;
          fields.append(d);
        }
        py::dict out;
        out["batch_size"] = m.batch_size;
        out["fields"] = fields;
        out["batch_bytes"] = m.batch_bytes;
        out["staged_batch_bytes"] = m.staged_batch_bytes;
        return out;
      });
}

// Loader: batches, state, stats and traces.
void BindLoader(py::module_& m) {
  py::class_<PyLoader>(m, "Loader")
      .def(py::init([](std::shared_ptr<Plan> plan, int rank, int world_size, uint64_t epoch,
                       std::optional<uint64_t> seed, int threads, int prefetch, int in_flight,
                       std::optional<bool> relaxed_ordering, bool dct_scaling,
                       std::optional<std::string> device, bool wait_for_device) {
             LoaderOptions o;
             o.rank = rank;
             o.world_size = world_size;
             o.epoch = epoch;
             o.seed = seed;
             o.threads = threads;
             o.prefetch = prefetch;
             o.in_flight = in_flight;
             o.relaxed_ordering = relaxed_ordering;
             o.dct_scaling = dct_scaling;
             o.device = device;
             o.wait_for_device = wait_for_device;
             std::optional<Result<Loader>> loader;
             {
               py::gil_scoped_release release;
               loader.emplace(Loader::Create(*plan, o));
             }
             return std::make_unique<PyLoader>(plan, Unwrap(std::move(*loader)));
           }),
           py::arg("plan"), py::arg("rank") = -1, py::arg("world_size") = -1, py::arg("epoch") = 0,
           py::arg("seed") = py::none(), py::arg("threads") = -1, py::arg("prefetch") = -1,
           py::arg("in_flight") = -1, py::arg("relaxed_ordering") = py::none(),
           py::arg("dct_scaling") = false, py::arg("device") = py::none(),
           py::arg("wait_for_device") = true)
      .def("__iter__",
           [](py::object self) {
             self.cast<PyLoader&>().SkipPendingEpochEnd();
             return self;
           })
      .def(
          "__next__",
          [](PyLoader& l) {
            auto b = l.Next();
            if (!b) throw py::stop_iteration();
            return std::move(*b);
          },
          "The next batch of this epoch; StopIteration at its end (the next `for` "
          "starts the following epoch).")
      .def("next", &PyLoader::Next,
           "The next batch as {field: Tensor}; None once at the end of an epoch (the "
           "following call starts the next epoch).")
      .def("state_dict", &PyLoader::StateDict)
      .def("load_state_dict", &PyLoader::LoadStateDict, py::arg("state"))
      .def("set_epoch", &PyLoader::SetEpoch, py::arg("epoch"))
      .def("stats", &PyLoader::Stats)
      .def("bad_samples", &PyLoader::BadSamples, py::arg("epoch"),
           "The distinct bad samples of `epoch` (the current one or the one before), each "
           "once: [{'epoch', 'sample' (dataset index), 'name', 'reason'}], sorted by index.")
      .def("drain_native", &PyLoader::DrainNative, py::arg("max_batches"))
      .def("start_trace", &PyLoader::StartTrace, py::arg("path"),
           py::arg("max_events_per_thread") = 0)
      .def("stop_trace", &PyLoader::StopTrace)
      .def_property_readonly("batches_per_epoch", &PyLoader::batches_per_epoch)
      .def_property_readonly("batch_size", &PyLoader::batch_size)
      .def_property_readonly("dataset_size", &PyLoader::dataset_size);
}

}  // namespace
}  // namespace sluice::python

PYBIND11_MODULE(_sluice, m) {
  using namespace sluice;
  using namespace sluice::python;
  m.doc() = "Sluice's C++ core (bindings). Use the `sluice` package, not this module.";
  m.attr("__version__") = SLUICE_VERSION;  // the VERSION file, through CMake
  RegisterErrors(m);
  BindTuning(m);
  BindPack(m);
  BindState(m);
  BindFunctions(m);
  BindPlan(m);
  BindTensor(m);
  BindLoader(m);
}
