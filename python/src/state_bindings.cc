#include "python/src/state_bindings.h"

#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "python/src/errors.h"

namespace py = pybind11;

namespace sluice::python {

py::dict StateToDict(const LoaderState& s) {
  py::dict d;
  d["epoch"] = s.epoch;
  d["position"] = s.position;
  d["spec_hash"] = s.spec_hash;
  d["samples"] = s.samples;
  d["batch_size"] = s.batch_size;
  py::list consumed;
  for (const PositionRange& r : s.consumed) {
    py::list pair;
    pair.append(r.begin);
    pair.append(r.end);
    consumed.append(pair);
  }
  d["consumed"] = consumed;
  d["order_world_size"] = s.order_world_size;
  d["world_size"] = s.world_size;
  d["rank"] = s.rank;
  d["rank_position"] = s.rank_position;
  d["rank_ahead"] = s.rank_ahead;
  return d;
}

Result<LoaderState> StateFromDict(const py::dict& d) {
  for (const char* key : {"epoch", "position", "spec_hash", "samples", "batch_size"}) {
    if (!d.contains(key)) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("state dict has no `") + key + "`",
                       "pass what loader.state_dict() (or sluice.merge_states) returned");
    }
  }
  LoaderState s;
  try {
    s.epoch = d["epoch"].cast<uint64_t>();
    s.position = d["position"].cast<uint64_t>();
    s.spec_hash = d["spec_hash"].cast<std::string>();
    s.samples = d["samples"].cast<uint64_t>();
    s.batch_size = d["batch_size"].cast<uint64_t>();
    if (d.contains("consumed")) {
      for (const auto& pair : d["consumed"].cast<std::vector<std::vector<uint64_t>>>()) {
        if (pair.size() != 2) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "state dict `consumed` holds [begin, end] pairs");
        }
        s.consumed.push_back({pair[0], pair[1]});
      }
    }
    if (d.contains("order_world_size")) s.order_world_size = d["order_world_size"].cast<int>();
    if (d.contains("world_size")) s.world_size = d["world_size"].cast<int>();
    if (d.contains("rank")) s.rank = d["rank"].cast<int>();
    if (d.contains("rank_position")) s.rank_position = d["rank_position"].cast<uint64_t>();
    if (d.contains("rank_ahead")) s.rank_ahead = d["rank_ahead"].cast<std::vector<uint64_t>>();
  } catch (const py::cast_error& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("state dict has a value of the wrong type: ") + e.what(),
                     "pass what loader.state_dict() returned");
  }
  return s;
}

void BindState(py::module_& m) {
  m.def(
      "merge_states",
      [](const py::list& states) -> py::dict {
        std::vector<LoaderState> parsed;
        for (const py::handle& h : states) {
          auto s = StateFromDict(h.cast<py::dict>());
          if (!s) RaiseError(s.error());
          parsed.push_back(std::move(*s));
        }
        auto merged = MergeStates(parsed);
        if (!merged) RaiseError(merged.error());
        return StateToDict(*merged);
      },
      py::arg("states"));
  m.def("local_rank", []() -> py::object {
    auto r = LocalRankFromEnvironment();
    if (!r) RaiseError(r.error());
    return py::int_(*r);
  });
}

}  // namespace sluice::python
