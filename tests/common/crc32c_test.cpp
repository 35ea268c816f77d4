#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace tp {
namespace {

TEST(Crc32c, MatchesTheCheckValueOfTheCastagnoliPolynomial) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI), B.4: 32 bytes of zeros, of 0xff, ascending.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, ContinuesOverBytesThatCameBefore) {
  const std::string all = "a shard written in pieces";
  EXPECT_EQ(crc32c(all.substr(9), crc32c(all.substr(0, 9))), crc32c(all));
  EXPECT_NE(crc32c(all.substr(9)), crc32c(all));
}

}  // namespace
}  // namespace tp
