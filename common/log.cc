// common/log.h: the level (SLUICE_LOG) and the one line format.
#include "common/log.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace sluice::log {
namespace {

constexpr int kUnset = -1;
std::atomic<int> g_level{kUnset};

Level LevelFromEnvironment() {
  const char* env = std::getenv("SLUICE_LOG");
  if (env == nullptr || *env == '\0') return Level::kInfo;
  if (auto level = ParseLevel(env)) return *level;
  // Not through Write: this runs inside CurrentLevel's once-initialisation.
  const std::string line =
      FormatLine(Level::kWarn, "",
                 std::string("SLUICE_LOG=") + env + " is not debug, info or warn; using info");
  std::fprintf(stderr, "%s\n", line.c_str());
  return Level::kInfo;
}

}  // namespace

std::optional<Level> ParseLevel(std::string_view text) {
  if (text == "debug") return Level::kDebug;
  if (text == "info") return Level::kInfo;
  if (text == "warn" || text == "warning") return Level::kWarn;
  return std::nullopt;
}

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warning";
  }
  return "info";
}

Level CurrentLevel() {
  int level = g_level.load(std::memory_order_relaxed);
  if (level != kUnset) return static_cast<Level>(level);
  static std::once_flag once;
  std::call_once(once, [] {
    const Level from_env = LevelFromEnvironment();
    int expected = kUnset;  // SetLevel may have run meanwhile: it wins
    g_level.compare_exchange_strong(expected, static_cast<int>(from_env));
  });
  return static_cast<Level>(g_level.load(std::memory_order_relaxed));
}

void SetLevel(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

std::string FormatLine(Level level, std::string_view component, std::string_view message) {
  std::string line = "sluice: ";
  line += LevelName(level);
  line += ": ";
  if (!component.empty()) {
    line += component;
    line += ": ";
  }
  line += message;
  return line;
}

void Write(Level level, std::string_view component, std::string_view message, std::FILE* sink) {
  if (level < CurrentLevel()) return;
  std::string line = FormatLine(level, component, message);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), sink != nullptr ? sink : stderr);
}

}  // namespace sluice::log
