// Utf8SequenceAt / IsValidUtf8 (common/utf8.h): what the trace writes as it
// is and what plan.json refuses.
#include "common/utf8.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(Utf8, ValidSequencesAndWhatIsNot) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain.jpg"));
  EXPECT_TRUE(IsValidUtf8("\xe7\x8c\xab_1.jpg"));     // 猫, 3 bytes
  EXPECT_TRUE(IsValidUtf8("\xf0\x9f\x90\x88.png"));   // U+1F408, 4 bytes
  EXPECT_EQ(Utf8SequenceAt("\xc3\xa9", 0), 2u);        // é
  EXPECT_FALSE(IsValidUtf8("caf\xe9.jpg"));           // Latin-1 é
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));              // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));          // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));      // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xe7\x8c"));              // cut short
  EXPECT_EQ(Utf8SequenceAt("a\xe9", 1), 0u);
}

}  // namespace
}  // namespace sluice
