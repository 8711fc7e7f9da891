// Whole-or-nothing, durable file replacement: the one way Sluice writes a file
// that a reader may open at any moment or that must survive a crash
// (plan.json, report.txt).
#pragma once

#include <string>
#include <string_view>

#include "sluice/result.h"

namespace sluice {

// Writes `bytes` to `path` so that `path` is at every moment either its old
// content or all of `bytes`, also across a crash or power loss: the bytes go
// to a new temporary file in the same directory, named uniquely (created with
// O_EXCL, so concurrent writers of the same path never share one), which is
// fsynced, renamed over `path`, and the directory fsynced. The file gets mode
// 0666 less the umask, like any newly created file. Concurrent writers of one
// path each succeed; the last rename wins. On failure the temporary file is
// removed and `path` is untouched. Errors: kIo naming the path and errno.
// Thread safety: safe to call from any thread.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace sluice
