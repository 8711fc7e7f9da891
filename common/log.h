// Sluice's log lines: one format and one level for every library and the CLI.
//
// Every line is written to stderr as
//   sluice: LEVEL: COMPONENT: MESSAGE      (COMPONENT omitted when empty)
// with LEVEL one of debug, info, warning. The level comes from the environment
// variable SLUICE_LOG=debug|info|warn (read once, on the first log call;
// default info; an unknown value means info and is reported once as a
// warning). Lines below the level are dropped before they are formatted.
//
// Progress bars (common/progress.h) are not log lines: they are drawn only on a
// terminal. Results a command prints (tables, summaries) go to stdout and are
// not log lines either.
//
// Thread safety: every function may be called from any thread; a line is
// written with one fwrite, so lines from different threads do not interleave.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2 };

// "debug", "info", "warn" (also "warning"), case-sensitive; nullopt otherwise.
std::optional<Level> ParseLevel(std::string_view text);
// "debug", "info", "warning": the LEVEL word of a log line.
const char* LevelName(Level level);

// The current level (SLUICE_LOG on first use, or what SetLevel set).
Level CurrentLevel();
// Overrides the level for the rest of the process (tests, --verbose flags).
void SetLevel(Level level);
inline bool Enabled(Level level) { return level >= CurrentLevel(); }

// The line `Write` would print, without the trailing newline.
std::string FormatLine(Level level, std::string_view component, std::string_view message);

// Writes the line when `level` is enabled. `sink` nullptr: stderr.
void Write(Level level, std::string_view component, std::string_view message,
           std::FILE* sink = nullptr);

inline void Debug(std::string_view component, std::string_view message) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, component, message);
}
inline void Info(std::string_view component, std::string_view message) {
  if (Enabled(Level::kInfo)) Write(Level::kInfo, component, message);
}
inline void Warn(std::string_view component, std::string_view message) {
  if (Enabled(Level::kWarn)) Write(Level::kWarn, component, message);
}

}  // namespace sluice::log
