// cli/report/plain_text.h: Base64 is RFC 4648's (its test vectors, and
// bytes that are not UTF-8 round-trip).
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

}  // namespace
}  // namespace sluice::cli::report
