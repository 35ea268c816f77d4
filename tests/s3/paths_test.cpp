#include <gtest/gtest.h>

#include <set>

#include "common/error.h"
#include "s3/paths.h"

namespace tp::s3 {
namespace {

TEST(PathsTest, SafeKeysMapUnderTheDestination) {
  EXPECT_EQ(local_path_for_key("data/train/a b+c=d~é.jpg", "data/"),
            std::filesystem::path("train/a b+c=d~é.jpg"));
  EXPECT_EQ(local_path_for_key("x..y/..z", ""), std::filesystem::path("x..y/..z"));
}

TEST(PathsTest, UnsafeKeysAreRejectedWithTheKeyNamed) {
  for (const std::string& key :
       std::vector<std::string>{"p/../escape", "p/a/../../escape", "p//abs", "p/a//b", "p/./a", "p/a\x01b",
                                "p/bad\xff", "p/.trainpoint-s3-cache.jsonl", "p/.x.tmp-1-2",
                                "p/" + std::string(256, 'a'), std::string("p/a\0b", 5)}) {
    try {
      local_path_for_key(key, "p/");
      ADD_FAILURE() << "accepted " << key;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::data);
      EXPECT_NE(std::string(error.what()).find("cannot be staged"), std::string::npos);
    }
  }
}

TEST(PathsTest, ParsesS3Urls) {
  EXPECT_EQ(parse_s3_url("s3://bucket/a/b").key, "a/b");
  EXPECT_EQ(parse_s3_url("s3://bucket").bucket, "bucket");
  EXPECT_THROW(parse_s3_url("http://bucket/a"), Error);
}

TEST(PathsTest, ShardsCoverEverythingOnceBalancedByBytes) {
  std::vector<ObjectInfo> objects;
  std::uint64_t total = 0;
  for (int i = 0; i < 100; ++i) {
    const std::uint64_t size = (static_cast<std::uint64_t>(i) * 7919) % 1000 + 1;
    objects.push_back({"k" + std::to_string(1000 + i), size, ""});
    total += size;
  }
  const auto shares = shard_by_bytes(objects, 7);
  ASSERT_EQ(shares.size(), 7u);
  std::set<std::size_t> seen;
  std::uint64_t largest_share = 0;
  std::uint64_t smallest_share = total;
  for (const auto& share : shares) {
    std::uint64_t bytes = 0;
    for (const std::size_t index : share) {
      EXPECT_TRUE(seen.insert(index).second);
      bytes += objects[index].size;
    }
    EXPECT_TRUE(std::is_sorted(share.begin(), share.end()));
    largest_share = std::max(largest_share, bytes);
    smallest_share = std::min(smallest_share, bytes);
  }
  EXPECT_EQ(seen.size(), objects.size());
  EXPECT_LE(largest_share - smallest_share, 1000u);  // within one object's size
  EXPECT_EQ(shard_by_bytes(objects, 7), shares);     // deterministic
}

}  // namespace
}  // namespace tp::s3
