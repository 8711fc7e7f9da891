// LoaderState <-> the plain dict Python checkpoints hold (loader.state_dict(),
// sluice.merge_states; docs/distributed.md), and the module functions
// merge_states and local_rank.
#pragma once

#include <pybind11/pybind11.h>

#include "sluice/loader.h"

namespace sluice::python {

// {"epoch", "position", "spec_hash", "samples", "batch_size", "consumed":
// [[begin, end], ...], "order_world_size", "world_size", "rank",
// "rank_position", "rank_ahead": [...]}: ints, strings and lists only.
pybind11::dict StateToDict(const LoaderState& s);
// Errors (kInvalidArgument): a required key missing (epoch, position,
// spec_hash, samples, batch_size), or a value of the wrong type.
Result<LoaderState> StateFromDict(const pybind11::dict& d);
// merge_states(list of dicts) -> dict and local_rank(); their errors are
// raised through RaiseError (errors.h).
void BindState(pybind11::module_& m);

}  // namespace sluice::python
