// TerminalSafe and Base64: see plain_text.h.
#include "cli/report/plain_text.h"

#include <openssl/evp.h>

#include <cstdint>

#include "common/utf8.h"

namespace sluice::cli::report {
namespace {

void AppendHex(std::string& out, unsigned char c) {
  static constexpr char kDigits[] = "0123456789abcdef";
  out += "\\x";
  out += kDigits[c >> 4];
  out += kDigits[c & 0xf];
}

// True for the code points of a UTF-8 sequence that a terminal may act on or
// that reorder the text shown around them.
bool IsUnsafeCodePoint(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

// The code point of the valid `n`-byte UTF-8 sequence at `p` (n >= 2).
uint32_t Decode(const unsigned char* p, size_t n) {
  uint32_t cp = p[0] & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (p[k] & 0x3f);
  return cp;
}

}  // namespace

std::string TerminalSafe(std::string_view s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      if (c == '\n' && keep_newlines) {
        out += '\n';
      } else {
        AppendHex(out, c);
      }
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (const size_t n = Utf8SequenceAt(s, i); n == 0) {
      AppendHex(out, c);  // not UTF-8: the byte itself
      ++i;
    } else {
      const auto* p = reinterpret_cast<const unsigned char*>(s.data() + i);
      if (IsUnsafeCodePoint(Decode(p, n))) {
        for (size_t k = 0; k < n; ++k) AppendHex(out, p[k]);
      } else {
        out.append(s.substr(i, n));
      }
      i += n;
    }
  }
  return out;
}

std::string Base64(std::string_view s) {
  // OpenSSL's encoder (a dependency already): 4 characters per 3 bytes, NUL
  // terminated.
  std::string out((s.size() + 2) / 3 * 4 + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace sluice::cli::report
