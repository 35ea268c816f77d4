// stage(): sharding, the cache across restarts, and uploads of outputs, against MinIO.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <thread>

#include "common/error.h"
#include "s3/stage.h"
#include "s3_server.h"
#include "support/process.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;
using testing::S3Server;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class StageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 30; ++i) {
      testing::write_text(
          source_ / "set" / ("dir" + std::to_string(i % 3)) / ("item" + std::to_string(i)),
          std::string(static_cast<std::size_t>(100 + i * 37), static_cast<char>('a' + i % 26)));
    }
    UploadRequest upload_request{source_ / "set", "s3://test-bucket/dataset/", options(),
                                 testing::fast_retries()};
    ASSERT_EQ(upload(upload_request).size(), 30u);
  }
  ConnectionOptions options() const {
    ConnectionOptions connection;
    connection.endpoint = server_.endpoint();
    connection.credentials_file = credentials_file_.string();
    return connection;
  }
  StageRequest request(const fs::path& destination) const {
    StageRequest stage_request;
    stage_request.source = "s3://test-bucket/dataset";
    stage_request.destination = destination;
    stage_request.connection = options();
    stage_request.transfer = testing::fast_retries();
    return stage_request;
  }

  S3Server server_;
  testing::TempDir source_;
  testing::TempDir scratch_;
  fs::path credentials_file_ = [this] {
    testing::write_text(scratch_ / "minio-test",
                        std::string("export MINIO_ACCESS_KEY=") + S3Server::kAccessKey +
                            "\nexport MINIO_SECRET_KEY=" + S3Server::kSecretKey + "\n");
    return scratch_ / "minio-test";
  }();
};

TEST_F(StageTest, StagesEverythingThenReusesTheCache) {
  const fs::path destination = scratch_ / "cache";
  StagedData first = stage(request(destination));
  EXPECT_EQ(first.objects.size(), 30u);
  EXPECT_EQ(first.downloaded, 30u);
  for (const auto& object : first.objects) {
    EXPECT_EQ(read_all(first.root / object.relative_path), read_all(source_ / "set" / object.relative_path));
  }
  EXPECT_TRUE(std::is_sorted(first.objects.begin(), first.objects.end(),
                             [](const auto& a, const auto& b) { return a.key < b.key; }));

  // A restart with nothing changed downloads nothing.
  StagedData second = stage(request(destination));
  EXPECT_EQ(second.downloaded, 0u);
  EXPECT_EQ(second.cached, 30u);

  // A changed object (new ETag), a damaged local file, and a leftover temporary file from a killed run.
  testing::write_text(source_ / "changed", "new content");
  UploadRequest change{source_ / "changed", "s3://test-bucket/dataset/dir0/item0", options(),
                       testing::fast_retries()};
  upload(change);
  testing::write_text(destination / "dir1/item1", "x");
  testing::write_text(destination / "dir2/.item2.tmp-999-0", "partial");
  StagedData third = stage(request(destination));
  EXPECT_EQ(third.downloaded, 2u);
  EXPECT_EQ(read_all(destination / "dir0/item0"), "new content");
  EXPECT_EQ(read_all(destination / "dir1/item1"), read_all(source_ / "set/dir1/item1"));
  EXPECT_FALSE(fs::exists(destination / "dir2/.item2.tmp-999-0"));
}

TEST_F(StageTest, ShardsAreDisjointCoverAllAndNodesShareOneTransfer) {
  std::set<std::string> seen;
  std::uint64_t total = 0;
  std::vector<std::uint64_t> bytes;
  for (int rank = 0; rank < 4; ++rank) {
    StageRequest stage_request = request(scratch_ / ("rank" + std::to_string(rank)));
    stage_request.sharding = Sharding::shard;
    stage_request.rank = rank;
    stage_request.world_size = 4;
    const StagedData staged = stage(stage_request);
    EXPECT_EQ(staged.downloaded, staged.objects.size());  // one rank per node: only its share
    for (const auto& object : staged.objects) {
      EXPECT_TRUE(seen.insert(object.key).second) << object.key;
      EXPECT_TRUE(fs::exists(staged.root / object.relative_path));
    }
    bytes.push_back(staged.bytes);
    total += staged.bytes;
  }
  EXPECT_EQ(seen.size(), 30u);
  EXPECT_LE(*std::max_element(bytes.begin(), bytes.end()) - *std::min_element(bytes.begin(), bytes.end()),
            1200u);

  // Two ranks on one node: the first stages both shares, the second finds them cached.
  StageRequest first = request(scratch_ / "node");
  first.sharding = Sharding::shard;
  first.world_size = 4;
  first.local_world_size = 2;
  StageRequest second = first;
  second.rank = 1;
  second.local_rank = 1;
  const StagedData first_staged = stage(first);
  const StagedData second_staged = stage(second);
  EXPECT_EQ(first_staged.downloaded, first_staged.objects.size() + second_staged.objects.size());
  EXPECT_EQ(second_staged.downloaded, 0u);
}

// Two ranks of one node staging at once into one destination: one transfer, the other finds it all cached.
TEST_F(StageTest, ConcurrentRanksOnANodeShareOneTransfer) {
  StagedData staged[2];
  std::thread other([&] { staged[1] = stage(request(scratch_ / "shared")); });
  staged[0] = stage(request(scratch_ / "shared"));
  other.join();
  EXPECT_EQ(staged[0].downloaded + staged[1].downloaded, 30u);
  EXPECT_EQ(std::min(staged[0].downloaded, staged[1].downloaded), 0u);
  EXPECT_EQ(staged[0].objects.size(), 30u);
  EXPECT_EQ(staged[1].objects.size(), 30u);
}

TEST_F(StageTest, MissingPrefixIsADataError) {
  StageRequest stage_request = request(scratch_ / "none");
  stage_request.source = "s3://test-bucket/no-such-prefix";
  try {
    stage(stage_request);
    FAIL() << "staging an empty prefix succeeded";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_NE(std::string(error.what()).find("s3://test-bucket/no-such-prefix"), std::string::npos);
  }
}

TEST_F(StageTest, SingleObjectSourceAndFileUpload) {
  StageRequest stage_request = request(scratch_ / "single");
  stage_request.source = "s3://test-bucket/dataset/dir2/item5";
  const StagedData staged = stage(stage_request);
  ASSERT_EQ(staged.objects.size(), 1u);
  EXPECT_EQ(staged.objects[0].relative_path, fs::path("item5"));
  EXPECT_EQ(read_all(staged.root / "item5"), read_all(source_ / "set/dir2/item5"));
}

}  // namespace
}  // namespace tp::s3
