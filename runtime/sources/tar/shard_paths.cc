#include "runtime/sources/tar/shard_paths.h"

#include <glob.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <system_error>
#include <unordered_set>

namespace sluice::runtime::tar {
namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxPatternBytes = 65536;

// The alternatives of a brace group's inside: split at top-level commas, or
// an integer range; nullopt when it is neither (the group stays literal) or
// when the range is longer than `max_names` (`too_many` set).
std::optional<std::vector<std::string>> Alternatives(std::string_view inside, size_t max_names,
                                                     bool& too_many) {
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < inside.size(); ++i) {
    if (inside[i] == '{') ++depth;
    if (inside[i] == '}') --depth;
    if (inside[i] == ',' && depth == 0) {
      parts.emplace_back(inside.substr(start, i - start));
      start = i + 1;
    }
  }
  if (!parts.empty()) {
    parts.emplace_back(inside.substr(start));
    return parts;
  }
  const size_t dots = inside.find("..");
  if (dots == std::string_view::npos) return std::nullopt;
  std::string_view a = inside.substr(0, dots), b = inside.substr(dots + 2);
  auto parse = [](std::string_view s, int64_t& v) {
    if (s.empty() || s.size() > 18) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && end == s.data() + s.size();
  };
  int64_t lo = 0, hi = 0;
  if (!parse(a, lo) || !parse(b, hi)) return std::nullopt;
  auto padded = [](std::string_view s) {
    std::string_view digits = s.substr(s[0] == '-' ? 1 : 0);
    return digits.size() > 1 && digits[0] == '0';
  };
  const size_t width = padded(a) || padded(b) ? std::max(a.size(), b.size()) : 0;
  const int64_t step = lo <= hi ? 1 : -1;
  const uint64_t count = static_cast<uint64_t>(lo <= hi ? hi - lo : lo - hi) + 1;
  if (count > max_names) {
    too_many = true;
    return std::nullopt;
  }
  for (int64_t v = lo;; v += step) {
    std::string s = std::to_string(v < 0 ? -v : v);
    const size_t sign = v < 0 ? 1 : 0;
    if (s.size() + sign < width) s.insert(0, width - s.size() - sign, '0');
    parts.push_back((v < 0 ? "-" : "") + s);
    if (v == hi) break;
  }
  return parts;
}

// How many names an expansion gives, and their total length.
struct ExpansionSize {
  uint64_t names = 0, bytes = 0;
};

// Brace expansion of one pattern within limits: Measure first, so that a
// pattern over them fails at once, then Expand.
class BraceExpander {
 public:
  BraceExpander(std::string_view pattern, const BraceLimits& limits)
      : pattern_(pattern), limits_(limits) {}

  // An expandable brace group: where its braces are, and its alternatives.
  struct Group {
    size_t open = 0, close = 0;
    std::vector<std::string> alts;
  };

  bool Over(const ExpansionSize& size) const {
    return size.names > limits_.max_names || size.bytes > limits_.max_bytes;
  }

  // Over the limits: `size` is what was measured up to that point (nullopt
  // when one range alone names more than max_names).
  Error TooMany(std::optional<ExpansionSize> size = std::nullopt) const {
    const std::string shown = pattern_.size() <= 200 ? pattern_ : pattern_.substr(0, 200) + "...";
    std::string what;
    if (!size || size->names > limits_.max_names) {
      what = "over " + std::to_string(limits_.max_names) + " shard names";
    } else {
      what = "over " + std::to_string(limits_.max_bytes) + " bytes of shard names (at least " +
             std::to_string(size->bytes) + ")";
    }
    return Error{ErrorCode::kInvalidArgument,
                 "brace pattern '" + shown + "' gives " + what,
                 "name fewer shards per tar_shards path",
                 {}};
  }

  // The first expandable brace group of `s` at or after `from`; nullopt when
  // there is none (the rest is literal).
  Result<std::optional<Group>> NextGroup(const std::string& s, size_t from) const {
    for (size_t open = s.find('{', from); open != std::string::npos; open = s.find('{', open + 1)) {
      int depth = 0;
      size_t close = std::string::npos;
      for (size_t i = open; i < s.size(); ++i) {
        if (s[i] == '{') ++depth;
        if (s[i] == '}' && --depth == 0) {
          close = i;
          break;
        }
      }
      if (close == std::string::npos) break;  // unmatched: the rest is literal
      bool too_many = false;
      auto alts = Alternatives(std::string_view(s).substr(open + 1, close - open - 1),
                               limits_.max_names, too_many);
      if (too_many) return std::unexpected(TooMany());
      if (alts) return Group{open, close, std::move(*alts)};
      // A literal group; look further right.
    }
    return std::nullopt;
  }

  // The size of Expand(s, from) without making the names. An alternative
  // without a brace leaves the rest of `s` to expand alike whatever it is:
  // that rest is measured once. Stops as soon as the size is Over().
  Result<ExpansionSize> Measure(const std::string& s, size_t from) const {
    auto group = NextGroup(s, from);
    if (!group) return std::unexpected(group.error());
    if (!*group) return ExpansionSize{1, s.size()};
    const Group& g = **group;
    ExpansionSize total;
    std::optional<ExpansionSize> rest;
    for (const std::string& alt : g.alts) {
      ExpansionSize one;
      if (alt.find('{') == std::string::npos) {
        if (!rest) {
          auto r = Measure(s.substr(g.close + 1), 0);
          if (!r || Over(*r)) return r;
          rest = *r;
        }
        one = {rest->names, rest->bytes + rest->names * (g.open + alt.size())};
      } else {
        auto r = Measure(s.substr(0, g.open) + alt + s.substr(g.close + 1), g.open);
        if (!r) return r;
        one = *r;
      }
      total.names += one.names;
      total.bytes += one.bytes;
      if (Over(total)) return total;
    }
    return total;
  }

  // Expands the first expandable brace group of `s` at or after `from` and
  // recurses (within the limits once Measure has passed).
  Status Expand(const std::string& s, size_t from, std::vector<std::string>& out) const {
    auto group = NextGroup(s, from);
    if (!group) return std::unexpected(group.error());
    if (!*group) {
      out.push_back(s);
      return Ok();
    }
    const Group& g = **group;
    for (const std::string& alt : g.alts) {
      // Re-scan from the group's start: the alternative may hold nested groups.
      SLUICE_RETURN_IF_ERROR(
          Expand(s.substr(0, g.open) + alt + s.substr(g.close + 1), g.open, out));
    }
    return Ok();
  }

 private:
  std::string pattern_;
  BraceLimits limits_;
};

Result<std::vector<std::string>> ListDirectory(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot list '" + dir + "': " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return MakeError(ErrorCode::kIo, "cannot list '" + dir + "': " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || !name.ends_with(".tar")) continue;  // no IsSluiceFile
    if (it->is_regular_file(ec)) paths.push_back(it->path().string());
  }
  if (paths.empty()) {
    return MakeError(ErrorCode::kNotFound, "tar_shards: no .tar file in directory '" + dir + "'");
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

bool IsSluiceFile(std::string_view file_name) {
  // An index's temporary file (IndexWriter::Write: NAME.tmp.PID.N) is judged
  // by the index's NAME.
  constexpr std::string_view kSluice = ".sluice";
  if (const size_t tmp = file_name.find(".sluice.tmp."); tmp != std::string_view::npos) {
    file_name = file_name.substr(0, tmp + kSluice.size());
  }
  return file_name == "index.sluice" || file_name == "manifest.json" ||
         (file_name.starts_with("sluice-index-") && file_name.ends_with(".sluice"));
}

Result<std::vector<std::string>> ExpandBraces(std::string_view pattern, const BraceLimits& limits) {
  // Expansion recurses once per brace group: a bound on the pattern bounds
  // its depth.
  if (pattern.size() > kMaxPatternBytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "a tar_shards path of " + std::to_string(pattern.size()) + " bytes; at most " +
                         std::to_string(kMaxPatternBytes),
                     "name fewer shards per tar_shards path");
  }
  const BraceExpander expander(pattern, limits);
  const std::string whole(pattern);
  auto size = expander.Measure(whole, 0);
  if (!size) return std::unexpected(size.error());
  if (expander.Over(*size)) return std::unexpected(expander.TooMany(*size));
  std::vector<std::string> out;
  out.reserve(size->names);
  SLUICE_RETURN_IF_ERROR(expander.Expand(whole, 0, out));
  return out;
}

Result<std::vector<std::string>> ResolveShardPaths(const std::string& path) {
  if (path.empty()) return MakeError(ErrorCode::kInvalidArgument, "tar_shards: empty path");
  std::error_code ec;
  if (fs::is_directory(path, ec)) return ListDirectory(path);
  auto names = ExpandBraces(path);
  if (!names) return std::unexpected(names.error());
  std::vector<std::string> paths;
  std::unordered_set<std::string> seen;  // lexically normal absolute paths
  auto add = [&](std::string p) {
    fs::path absolute = fs::absolute(p, ec);
    if (seen.insert(ec ? p : absolute.lexically_normal().string()).second) {
      paths.push_back(std::move(p));
    }
  };
  for (const std::string& name : *names) {
    if (name.find_first_of("*?[") != std::string::npos) {
      glob_t g{};
      const int rc = ::glob(name.c_str(), 0, nullptr, &g);
      if (rc == GLOB_NOMATCH) {
        ::globfree(&g);
        return MakeError(ErrorCode::kNotFound, "tar_shards: no file matches '" + name + "'");
      }
      if (rc != 0) {
        ::globfree(&g);
        return MakeError(ErrorCode::kIo, "tar_shards: cannot match '" + name + "'");
      }
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        const fs::path match(g.gl_pathv[i]);
        if (IsSluiceFile(match.filename().string())) continue;
        if (fs::is_regular_file(match, ec)) add(g.gl_pathv[i]);
      }
      ::globfree(&g);
      continue;
    }
    if (!fs::is_regular_file(name, ec)) {
      return MakeError(ErrorCode::kNotFound, "tar_shards: shard '" + name + "' does not exist",
                       names->size() > 1 ? "from the pattern '" + path + "'" : "");
    }
    add(name);
  }
  if (paths.empty()) {
    return MakeError(ErrorCode::kNotFound, "tar_shards: no shard file matches '" + path + "'");
  }
  return paths;
}

}  // namespace sluice::runtime::tar
