// cli/report/plain_text.h: Base64 is RFC 4648's (its test vectors, and
// bytes that are not UTF-8 round-trip); TerminalSafe escapes what could act
// on a terminal (control bytes, bytes that are not UTF-8, C1 and bidi
// controls) as \xNN and keeps other text, UTF-8 included.
#include "cli/report/plain_text.h"

#include <gtest/gtest.h>

namespace sluice::cli::report {
namespace {

TEST(PlainTextTest, Base64IsRfc4648) {
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64("caf\xe9.jpg"), "Y2Fm6S5qcGc=");
  EXPECT_EQ(Base64(std::string("\x00\xff\xfe", 3)), "AP/+");
}

TEST(PlainTextTest, TerminalSafeEscapesWhatCouldDriveATerminal) {
  EXPECT_EQ(TerminalSafe("/data/img_1.jpg"), "/data/img_1.jpg");
  EXPECT_EQ(TerminalSafe("evil\x1b[31mRED\x1b[0m.jpg"), "evil\\x1b[31mRED\\x1b[0m.jpg");
  EXPECT_EQ(TerminalSafe("a\tb\rc\x7f"), "a\\x09b\\x0dc\\x7f");
  EXPECT_EQ(TerminalSafe("line\nnext"), "line\\x0anext");
  EXPECT_EQ(TerminalSafe("line\nnext", true), "line\nnext");
  EXPECT_EQ(TerminalSafe(std::string("nul\0.jpg", 8)), "nul\\x00.jpg");
  EXPECT_EQ(TerminalSafe("back\\slash"), "back\\\\slash");              // unambiguous
  EXPECT_EQ(TerminalSafe("caf\xe9.jpg"), "caf\\xe9.jpg");               // Latin-1: not UTF-8
  EXPECT_EQ(TerminalSafe("\xe7\x8c\xab_1.jpg"), "\xe7\x8c\xab_1.jpg");  // 猫 stays
  EXPECT_EQ(TerminalSafe("caf\xc3\xa9"), "caf\xc3\xa9");                // é stays
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "31m"),
            "\\xc2\\x9b"
            "31m");                                                // C1 CSI
  EXPECT_EQ(TerminalSafe("a\xe2\x80\xae" "b"), "a\\xe2\\x80\\xaeb");  // U+202E
  EXPECT_EQ(TerminalSafe("\xe7\x8c"), "\\xe7\\x8c");               // a cut sequence
}

}  // namespace
}  // namespace sluice::cli::report
