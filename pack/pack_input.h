// What `sluice pack` (and Python's sluice.pack) packs: SPEC_OR_SOURCE is a
// spec (.yaml/.yml: its `source`, ${VARS} bound from `vars` and then the
// environment), a directory (image_folder) or a list file (.csv/.tsv/.txt:
// file_list).
#pragma once

#include <map>
#include <string>

#include "ops/param.h"
#include "sluice/result.h"

namespace sluice::runtime {

struct PackInput {
  std::string format;  // the source op's name
  ParamList params;    // defaults filled, ${VARS} bound
};

// Errors: kInvalidArgument (not a spec, directory or list), kNotFound (no such
// spec), kInvalidSpec (the spec's diagnostics), an unbound ${VAR}.
Result<PackInput> ResolvePackInput(const std::string& spec_or_source,
                                   const std::map<std::string, std::string>& vars);

}  // namespace sluice::runtime
