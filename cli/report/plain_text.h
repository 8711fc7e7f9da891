// Names from file systems and data sets, made safe to show: on a terminal
// (TerminalSafe: escape sequences and bytes that are not UTF-8 escaped, so a
// file name cannot drive the terminal) and losslessly in JSON (Base64: the
// exact bytes of a name that is not UTF-8). Used by `sluice run`'s summary
// and its --bad-samples list (docs/observability.md).
#pragma once

#include <string>
#include <string_view>

namespace sluice::cli::report {

// `s` with every byte that could act on a terminal or is not text written as
// \xNN (two lower-case hex digits): control bytes (0x00-0x1f, 0x7f; with
// `keep_newlines`, '\n' stays), bytes that are not part of valid UTF-8, C1
// controls (U+0080-U+009F) and the bidirectional-text controls (U+061C,
// U+200E-U+200F, U+202A-U+202E, U+2066-U+2069) by their UTF-8 bytes, and a
// backslash as \\ (so the result reads back unambiguously). Other UTF-8 text
// is kept as it is.
std::string TerminalSafe(std::string_view s, bool keep_newlines = false);

// Standard base64 (RFC 4648, with '=' padding) of the bytes of `s`.
std::string Base64(std::string_view s);

}  // namespace sluice::cli::report
