// common/log.h: the SLUICE_LOG level filter and the one line format.
#include "common/log.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace sluice::log {
namespace {

std::string Contents(std::FILE* f) {
  std::string out;
  std::rewind(f);
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

// Restores the process's level after a test that changes it.
class LevelGuard {
 public:
  LevelGuard() : saved_(CurrentLevel()) {}
  ~LevelGuard() { SetLevel(saved_); }

 private:
  Level saved_;
};

TEST(Log, ParsesTheThreeLevels) {
  EXPECT_EQ(ParseLevel("debug"), Level::kDebug);
  EXPECT_EQ(ParseLevel("info"), Level::kInfo);
  EXPECT_EQ(ParseLevel("warn"), Level::kWarn);
  EXPECT_EQ(ParseLevel("warning"), Level::kWarn);
  EXPECT_EQ(ParseLevel("verbose"), std::nullopt);
  EXPECT_EQ(ParseLevel(""), std::nullopt);
  EXPECT_EQ(ParseLevel("INFO"), std::nullopt);
}

TEST(Log, LineFormat) {
  EXPECT_EQ(FormatLine(Level::kWarn, "tar_shards", "ignoring x"),
            "sluice: warning: tar_shards: ignoring x");
  EXPECT_EQ(FormatLine(Level::kInfo, "", "hello"), "sluice: info: hello");
  EXPECT_EQ(FormatLine(Level::kDebug, "loader", "m"), "sluice: debug: loader: m");
}

TEST(Log, LevelFiltersLowerLines) {
  LevelGuard guard;
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  SetLevel(Level::kWarn);
  EXPECT_FALSE(Enabled(Level::kInfo));
  Write(Level::kDebug, "c", "dropped debug", sink);
  Write(Level::kInfo, "c", "dropped info", sink);
  Write(Level::kWarn, "c", "kept warn", sink);
  SetLevel(Level::kDebug);
  Write(Level::kDebug, "c", "kept debug", sink);
  EXPECT_EQ(Contents(sink), "sluice: warning: c: kept warn\nsluice: debug: c: kept debug\n");
  std::fclose(sink);
}

TEST(Log, InfoLevelKeepsInfoDropsDebug) {
  LevelGuard guard;
  std::FILE* sink = std::tmpfile();
  ASSERT_NE(sink, nullptr);
  SetLevel(Level::kInfo);
  Write(Level::kDebug, "", "no", sink);
  Write(Level::kInfo, "", "yes", sink);
  EXPECT_EQ(Contents(sink), "sluice: info: yes\n");
  std::fclose(sink);
}

}  // namespace
}  // namespace sluice::log
