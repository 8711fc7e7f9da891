// `sluice inspect`: the two halves of the verb (cli/inspect_command.cc parses
// the arguments and dispatches).
#pragma once

#include <string>

namespace sluice::cli {

// `sluice inspect PLAN [--json]`: prints plan.json for people (or, with
// as_json, one JSON object for tools). Returns the exit code.
int InspectPlan(const std::string& dir, bool as_json);

}  // namespace sluice::cli
