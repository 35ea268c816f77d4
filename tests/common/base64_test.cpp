#include "common/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace tp {
namespace {

// RFC 4648's test vectors (section 10), and bytes above 0x7F.
TEST(Base64, EncodesTheRfcTestVectorsAndHighBytes) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\xff\xd8\xff\x00", 4)), "/9j/AA==");
}

}  // namespace
}  // namespace tp
