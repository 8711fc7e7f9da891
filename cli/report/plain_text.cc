// Base64: see plain_text.h.
#include "cli/report/plain_text.h"

#include <cstdint>

namespace sluice::cli::report {

std::string Base64(std::string_view s) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << 16;
    if (i + 1 < s.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(s[i + 1])) << 8;
    if (i + 2 < s.size()) v |= static_cast<unsigned char>(s[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

}  // namespace sluice::cli::report
