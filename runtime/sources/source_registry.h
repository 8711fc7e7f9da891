// The source registry: the plan's source op name (plan.json "source.format",
// an OpClass::kSource op of ops/source_ops.cc) -> how to open that source from
// the op's params.
//
// A new source is one file (a Source subclass with a function that opens it
// from its ParamList) plus one line in the table in source_registry.cc, plus
// its op entry in ops/source_ops.cc and its tests. A test checks that every
// source op of the op registry has an entry here and the other way round.
//
// Why an explicit table, not self-registering static objects: the runtime is a
// static library, and the linker drops an object file nothing references, so a
// source that only registered itself from a static initializer would vanish
// from some binaries.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "ops/param.h"
#include "runtime/sources/source.h"
#include "sluice/result.h"

namespace sluice::runtime {

// Opens a source from its op's params: defaults filled and ${VARS} bound (as
// Plan::source_params() gives them). Errors: the source's own (kNotFound for a
// missing dataset, kInvalidSpec for a bad list, ...).
using OpenSourceFn = Result<std::unique_ptr<Source>> (*)(const ParamList& params);

struct SourceEntry {
  std::string_view format;  // the source op's name, e.g. "image_folder"
  OpenSourceFn open;
};

// Every source this build has, in the table's order.
std::span<const SourceEntry> RegisteredSources();

// The entry for `format`, or nullptr.
const SourceEntry* FindSource(std::string_view format);

// Opens the source `format` with `params`. Errors: kInvalidArgument naming the
// format and the formats this build has, for an unknown format; else the
// source's own errors.
Result<std::unique_ptr<Source>> OpenSource(std::string_view format, const ParamList& params);

// For tests (a fake source behind a compiled plan): while it lives,
// OpenSource(format) opens with `open` instead of the table's entry (`format`
// must outlive it: a literal). One override at a time; create and destroy it
// while no loader is being created.
class ScopedSourceOverride {
 public:
  ScopedSourceOverride(std::string_view format, OpenSourceFn open);
  ~ScopedSourceOverride();
  ScopedSourceOverride(const ScopedSourceOverride&) = delete;
  ScopedSourceOverride& operator=(const ScopedSourceOverride&) = delete;
};

// A string param of `params`, or `fallback` when absent or not a string (for
// the sources' open functions).
std::string SourceParamString(const ParamList& params, const std::string& name,
                              const std::string& fallback);

}  // namespace sluice::runtime
