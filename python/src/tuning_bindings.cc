// Bindings for `sluice.profile` and `Plan.tune` (python/sluice/tuning.py):
// the machine profiler (with the compiler's kernel probes) and the autotuner.
//
// Errors are raised through RaiseError (errors.h), so they keep their file,
// line and column (a malformed hardware profile names its line). The GIL is
// released while measuring.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "common/hardware_profile.h"
#include "compiler/driver/profile_probes.h"
#include "python/src/errors.h"
#include "runtime/device/gpu_probe.h"
#include "runtime/profile/machine_profiler.h"
#include "runtime/tune/autotuner.h"
#include "sluice/plan.h"

namespace py = pybind11;

namespace sluice::python {
namespace {

py::dict ProfileDict(const HardwareProfile& p) {
  py::dict d;
  d["format_version"] = HardwareProfile::kFormatVersion;
  d["machine"] = p.machine;
  d["measured_at"] = p.measured_at;
  d["sluice_version"] = p.sluice_version;
  py::dict cpu;
  cpu["cores"] = p.cpu.cores;
  cpu["model"] = p.cpu.model;
  cpu["simd"] = p.cpu.simd;
  cpu["decode_mpix_per_s"] = p.cpu.decode_mpix_per_s;
  cpu["decode_fixed_s"] = p.cpu.decode_fixed_s;
  cpu["resample_ns_per_px"] = p.cpu.resample_ns_per_px;
  cpu["pointwise_ns_per_elem"] = p.cpu.pointwise_ns_per_elem;
  cpu["memory_bandwidth_gbps"] = p.cpu.memory_bandwidth_gbps;
  d["cpu"] = cpu;
  if (p.storage) {
    py::dict s;
    s["path"] = p.storage->path;
    s["read_mbps"] = p.storage->read_mbps;
    s["latency_s"] = p.storage->latency_s;
    s["mean_file_bytes"] = p.storage->mean_file_bytes;
    s["mean_width"] = p.storage->mean_width;
    s["mean_height"] = p.storage->mean_height;
    s["decode_mpix_per_s"] = p.storage->decode_mpix_per_s;
    d["storage"] = s;
  } else {
    d["storage"] = py::none();
  }
  if (p.gpu) {
    py::dict g;
    g["name"] = p.gpu->name;
    g["device"] = p.gpu->device;
    g["h2d_pinned_gbps"] = p.gpu->h2d_pinned_gbps;
    g["h2d_pageable_gbps"] = p.gpu->h2d_pageable_gbps;
    g["pointwise_gelem_per_s"] = p.gpu->pointwise_gelem_per_s;
    g["launch_s"] = p.gpu->launch_s;
    d["gpu"] = g;
  } else {
    d["gpu"] = py::none();  // no CUDA device (or driver) here
  }
  return d;
}

py::dict KnobsDict(const runtime::Knobs& k) {
  py::dict d;
  d["threads"] = k.threads;
  d["in_flight"] = k.in_flight;
  d["prefetch"] = k.prefetch;
  return d;
}

}  // namespace

void BindTuning(py::module_& m) {
  m.def(
      "profile_machine",
      [](const std::string& data, const std::string& machine, double seconds, int max_files) {
        Result<HardwareProfile> profile = MakeError(ErrorCode::kInternal, "not run");
        {
          py::gil_scoped_release release;
          auto plans = CompileProfilePlans(runtime::BestSimdLevel());
          if (!plans) {
            profile = std::unexpected(plans.error());
          } else {
            runtime::MachineProfileOptions o;
            o.data = data;
            o.machine = machine;
            o.seconds = seconds;
            o.max_files = max_files;
            o.resample_plan = (*plans)->resample_plan;
            o.pointwise_plan = (*plans)->pointwise_plan;
            profile = runtime::ProfileMachine(o);
            if (profile) {
              if (auto gpu = runtime::MeasureGpu(0)) profile->gpu = *gpu;
            }
          }
        }
        if (!profile) RaiseError(profile.error());
        py::dict out;
        out["profile"] = ProfileDict(*profile);
        out["yaml"] = HardwareProfileToYaml(*profile);
        return out;
      },
      py::arg("data") = "", py::arg("machine") = "", py::arg("seconds") = 20.0,
      py::arg("max_files") = 256,
      "Measures this machine; returns {'profile': dict, 'yaml': text}.");

  m.def(
      "tune_plan",
      [](const std::string& plan_path, const PlanVars& vars, const std::string& profile_path,
         int cpu_budget, int64_t memory_budget, double seconds) {
        auto profile = LoadHardwareProfile(profile_path);
        if (!profile) RaiseError(profile.error());
        auto plan = Plan::Load(plan_path, vars);
        if (!plan) RaiseError(plan.error());
        runtime::TuneOptions o;
        o.cpu_budget = cpu_budget;
        o.memory_budget = memory_budget;
        if (seconds > 0) o.seconds = seconds;
        Result<runtime::TuneResult> result = MakeError(ErrorCode::kInternal, "not run");
        Status written = Ok();
        {
          py::gil_scoped_release release;
          result = runtime::Autotune(*plan, *profile, o);
          if (result) written = runtime::WriteTunedKnobs(plan_path, *result, profile->machine);
        }
        if (!result) RaiseError(result.error());
        Check(written);
        py::dict out = KnobsDict(result->best);
        out["cpu_budget"] = result->cpu_budget;
        out["memory_budget"] = result->memory_budget > 0
                                   ? py::object(py::int_(result->memory_budget))
                                   : py::object(py::none());
        out["images_per_second"] = result->images_per_second;
        out["batch_bytes"] = result->batch_bytes;
        py::list trials;
        for (const runtime::Trial& t : result->trials) {
          py::dict d = KnobsDict(t.knobs);
          d["trial"] = t.index;
          d["images_per_second"] = t.images_per_second;
          d["spread"] = t.spread;
          d["cpu_cores"] = t.cpu_cores;
          d["memory_bytes"] = t.memory_bytes;
          d["note"] = t.note;
          trials.append(d);
        }
        out["trials"] = trials;
        return out;
      },
      py::arg("plan"), py::arg("vars"), py::arg("profile"), py::arg("cpu_budget") = -1,
      py::arg("memory_budget") = -1, py::arg("seconds") = -1.0,
      "Tunes the plan's loader knobs and writes them into plan.json; returns the result.");
}

}  // namespace sluice::python
