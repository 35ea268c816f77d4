#include "common/url.h"

#include <gtest/gtest.h>

namespace tp {
namespace {

TEST(RedactedUrl, RedactsPasswordsOnly) {
  EXPECT_EQ(redacted_url("https://u:tok@h/r.git"), "https://u:***@h/r.git");
  EXPECT_EQ(redacted_url("https://h/r.git"), "https://h/r.git");
  EXPECT_EQ(redacted_url("ssh://git@h/r.git"), "ssh://git@h/r.git");
  EXPECT_EQ(redacted_url("https://user:p%40ss@pypi.example/simple/"), "https://user:***@pypi.example/simple/");
  EXPECT_EQ(redacted_url("/srv/repo.git"), "/srv/repo.git");
}

TEST(Url, PercentEncodingKeepsOnlyUnreservedCharacters) {
  EXPECT_EQ(percent_encode("a b+c=d~e_f.g-h/é", true), "a%20b%2Bc%3Dd~e_f.g-h/%C3%A9");
  EXPECT_EQ(percent_encode("a/b", false), "a%2Fb");
}

}  // namespace
}  // namespace tp
