// Bounds on what a spec may make the compiler read and walk. A spec is a short
// hand-written file; these limits keep a hostile or broken one (a huge file,
// deep nesting, a YAML "billion laughs" of nested aliases) to one clear
// diagnostic in bounded time and memory.
//
// Aliases: yaml-cpp shares an anchor's node among its aliases, so loading
// `b: &b [*a, *a, ...]` chains costs memory linear in the text, but every walk
// of the tree re-visits an anchor's whole subtree at each alias. The tree
// check therefore counts node visits the way any walk would (an alias counts
// its anchor's subtree again) and stops at the first limit passed; a
// self-referencing anchor (`&a [*a]`) stops at the depth limit.
#pragma once

#include <cstddef>
#include <string>

namespace YAML {
class Node;
}

namespace sluice {

class Diagnostics;

inline constexpr size_t kMaxSpecBytes = size_t{1} << 20;  // 1 MiB
inline constexpr int kMaxSpecDepth = 64;                  // nested maps / lists
inline constexpr size_t kMaxSpecNodes = 100'000;          // node visits, aliases expanded

// False (one diagnostic at file:1:1 added) when a spec of `bytes` bytes is
// over kMaxSpecBytes.
bool SpecSizeWithinLimits(size_t bytes, const std::string& file, Diagnostics& diags);

// False (one diagnostic added) when walking `root` passes kMaxSpecDepth (at
// the too-deep node's file:line:col) or kMaxSpecNodes (at the top-level key or
// value whose walk passed it). Visits at most
// kMaxSpecNodes + 1 nodes.
bool SpecTreeWithinLimits(const YAML::Node& root, const std::string& file, Diagnostics& diags);

}  // namespace sluice
