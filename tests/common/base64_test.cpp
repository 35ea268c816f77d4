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

TEST(Base64, DecodesWhatItEncodesAndNothingThatIsNotBase64) {
  for (const std::string bytes : {"f", "fo", "foo", "foob", "fooba", "foobar"}) {
    EXPECT_EQ(base64_decode(base64(bytes)), bytes);
  }
  EXPECT_EQ(base64_decode("/9j/AA=="), std::string("\xff\xd8\xff\x00", 4));
  EXPECT_EQ(base64_decode("Zm9"), "") << "not a multiple of 4";
  EXPECT_EQ(base64_decode("Zm9*"), "") << "not the alphabet";
}

}  // namespace
}  // namespace tp
