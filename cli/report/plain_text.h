// Names from file systems and data sets, made safe to show: losslessly in
// JSON (Base64: the exact bytes of a name that is not UTF-8). Used by
// `sluice run`'s --bad-samples list (docs/observability.md).
#pragma once

#include <string>
#include <string_view>

namespace sluice::cli::report {

// Standard base64 (RFC 4648, with '=' padding) of the bytes of `s`.
std::string Base64(std::string_view s);

}  // namespace sluice::cli::report
