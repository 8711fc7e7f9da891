// common/progress.h: drawn on a terminal, silent otherwise.
#include "common/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace sluice {
namespace {

std::string Contents(std::FILE* f) {
  std::string out;
  std::fflush(f);
  std::rewind(f);
  char buf[256];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  return out;
}

TEST(Progress, SilentWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress bar("pack", 10, "samples", {.stream = f, .tty = false});
    EXPECT_FALSE(bar.active());
    bar.SetNote("note");
    for (uint64_t i = 0; i <= 10; ++i) bar.Update(i);
    bar.StartTicker();
    bar.Finish();
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

TEST(Progress, AFileIsNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress bar("pack", 3, "samples", {.stream = f});  // tty from isatty: false
    EXPECT_FALSE(bar.active());
    bar.Update(3);
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

TEST(Progress, DrawsCountAndEndsTheLineOnATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress bar("inspect", 4, "files", {.stream = f, .tty = true});
    bar.Update(1);
    bar.Update(4);  // the last update always draws
    bar.Finish();
  }
  const std::string out = Contents(f);
  EXPECT_NE(out.find("\rinspect [#######.......................] 1/4 files"), std::string::npos)
      << out;
  EXPECT_NE(out.find("4/4 files"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
  std::fclose(f);
}

TEST(Progress, DelayKeepsAQuickOperationSilent) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress bar("compile", 0, "s", {.stream = f, .tty = true, .delay_seconds = 3600});
    bar.StartTicker();
    bar.Update(1);
    bar.Finish();
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

TEST(Progress, TickerDrawsElapsedTime) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress bar("tune", 30, "s", {.stream = f, .tty = true});
    bar.SetNote("trial 1");
    bar.StartTicker();  // draws once at once, then every 200 ms
    bar.Finish();
  }
  const std::string out = Contents(f);
  EXPECT_NE(out.find("\rtune ["), std::string::npos) << out;
  EXPECT_NE(out.find("/30 s  trial 1"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
  std::fclose(f);
}

}  // namespace
}  // namespace sluice
