// The `sluice` command: one function per verb, dispatched from main.cc.
//
// Every verb takes the arguments after its name, writes results to stdout and
// problems to stderr, and returns the process exit code:
//   0 success, 1 the spec (or input) has errors, 2 usage error or a feature
//   that is not built yet.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sluice/result.h"

namespace sluice {

struct Spec;

namespace cli {

using Args = std::vector<std::string>;

int Compile(const Args& args);
int Schema(const Args& args);
int Ops(const Args& args);

// The usage text printed by `sluice help` and after a usage error.
std::string UsageText();
// Prints "sluice: error: MESSAGE" and a pointer to `sluice help`; returns 2.
int UsageError(const std::string& message);

// A flag `--name=value` or `--name value` / `-n value`: when args[i] is `flag`
// or starts with `flag=`, stores the value (advancing i past a separate value)
// and returns true. A missing separate value is a usage error reported through
// `error`.
bool TakeValue(const Args& args, size_t& i, const std::string& flag, std::string& value,
               std::string& error);

// `--var NAME=VALUE` (either flag form): when args[i] is --var, stores the
// binding in `vars` (advancing i like TakeValue) and returns true; a missing
// value or one without `NAME=` is reported through `error`.
bool TakeVar(const Args& args, size_t& i, std::map<std::string, std::string>& vars,
             std::string& error);

// True when `args` holds `--help` or `-h`: the verb prints its usage (cli/main.cc
// does it for every verb) and exits 0.
bool WantsHelp(const Args& args);

// How a verb prints an error: Error::ToString(), except that a message that
// is already rendered diagnostics (the spec front end's "FILE:L:C: error: ..."
// lines, carried whole in one Error) is printed as it is, not labelled twice.
std::string ErrorText(const Error& error);

// A whole decimal integer (optional sign, nothing else); false otherwise.
bool ParseInt(const std::string& text, int64_t& out);

// The validated spec as YAML with every default explicit and every step's
// `in`/`out` written out (what `--emit=spec` prints).
std::string EmitSpecYaml(const Spec& spec);

}  // namespace cli
}  // namespace sluice
