// UTF-8 validity, for text that comes from file systems and specs (names need
// not be UTF-8; JSON must be).
#pragma once

#include <cstddef>
#include <string_view>

namespace sluice {

// The length of the valid UTF-8 sequence that starts at s[i] (1 for ASCII, 2
// to 4 otherwise; no overlong forms, surrogates or code points past
// U+10FFFF), or 0 when none starts there.
size_t Utf8SequenceAt(std::string_view s, size_t i);

// True when all of `s` is valid UTF-8.
bool IsValidUtf8(std::string_view s);

}  // namespace sluice
