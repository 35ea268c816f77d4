// The client against a real S3 server (s3rver) and through a proxy that injects faults.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <random>

#include "common/error.h"
#include "s3/client.h"
#include "s3_server.h"
#include "support/process.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;
using testing::FaultProxy;
using testing::S3Server;

std::string random_bytes(std::size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (auto& byte : bytes) byte = static_cast<char>(random());
  return bytes;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Uploads `content` under `key` through a file, as outputs are uploaded.
ObjectInfo put(Client& client, const testing::TempDir& scratch, const std::string& key,
               const std::string& content) {
  const fs::path file = scratch / "upload.bin";
  testing::write_text(file, content);
  return client.upload(S3Server::kBucket, {{file, key}}).at(0);
}

class ClientTest : public ::testing::Test {
 protected:
  S3Server server_;
  testing::TempDir scratch_;
};

TEST_F(ClientTest, PutListHeadGetRoundTripWithOddKeys) {
  Client client(testing::test_connection(server_.endpoint()), testing::fast_retries());
  const std::vector<std::string> keys = {"set/a b.txt", "set/plus+equals=tilde~.bin", "set/ünï/日本.txt",
                                         "set/x%y&z"};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const ObjectInfo stored = put(client, scratch_, keys[i], "content " + std::to_string(i));
    EXPECT_TRUE(etag_is_md5(stored.etag)) << stored.etag;
  }
  const Listing listing = client.list(S3Server::kBucket, "set/");
  ASSERT_EQ(listing.objects.size(), keys.size());
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(listing.objects[i].key, sorted[i]);

  const auto head = client.head(S3Server::kBucket, keys[2]);
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->size, std::string("content 2").size());
  EXPECT_FALSE(client.head(S3Server::kBucket, "set/absent").has_value());

  std::vector<DownloadItem> items;
  for (const auto& object : listing.objects) items.push_back({object, scratch_ / "out" / object.key});
  client.download(S3Server::kBucket, items);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(read_all(scratch_ / "out" / keys[i]), "content " + std::to_string(i));
  }
}

TEST_F(ClientTest, ListingPaginatesAndDelimits) {
  auto settings = testing::fast_retries();
  settings.list_page_size = 7;
  Client client(testing::test_connection(server_.endpoint()), settings);
  std::vector<UploadItem> items;
  for (int i = 0; i < 23; ++i) {
    const fs::path file = scratch_ / ("f" + std::to_string(i));
    testing::write_text(file, std::to_string(i));
    items.push_back({file, "many/" + std::string(i % 2 ? "odd/" : "") + std::to_string(100 + i)});
  }
  client.upload(S3Server::kBucket, items);
  EXPECT_EQ(client.list(S3Server::kBucket, "many/").objects.size(), 23u);
  const Listing top = client.list(S3Server::kBucket, "many/", "/");
  EXPECT_EQ(top.objects.size(), 12u);
  ASSERT_EQ(top.common_prefixes.size(), 1u);
  EXPECT_EQ(top.common_prefixes[0], "many/odd/");
}

TEST_F(ClientTest, MissingBucketIsAPermanentDataError) {
  Client client(testing::test_connection(server_.endpoint()), testing::fast_retries());
  try {
    client.list("no-such-bucket", "x/");
    FAIL() << "listing a missing bucket succeeded";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_NE(std::string(error.what()).find("s3://no-such-bucket/x/"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("NoSuchBucket"), std::string::npos);
  }
}

TEST_F(ClientTest, LargeObjectsTravelInPartsBothWays) {
  auto settings = testing::fast_retries();
  settings.part_size = 5 << 20;
  settings.parallel_download_threshold = 6 << 20;
  settings.multipart_upload_threshold = 6 << 20;
  const std::string content = random_bytes((12 << 20) + 12345, 7);
  FaultProxy proxy(server_.port(), "[]");
  Client client(testing::test_connection(proxy.endpoint()), settings);
  const ObjectInfo stored = put(client, scratch_, "big/blob.bin", content);
  EXPECT_EQ(stored.size, content.size());
  EXPECT_FALSE(stored.etag.empty());

  const auto head = client.head(S3Server::kBucket, "big/blob.bin");
  ASSERT_TRUE(head);
  client.download(S3Server::kBucket, {{*head, scratch_ / "blob.bin"}});
  EXPECT_TRUE(read_all(scratch_ / "blob.bin") == content);
  const std::string log = proxy.requests();
  EXPECT_NE(log.find("bytes=0-5242879"), std::string::npos) << log;
  EXPECT_NE(log.find("bytes=10485760-"), std::string::npos) << log;
  EXPECT_NE(log.find("partNumber=3&uploadId="), std::string::npos) << log;
  EXPECT_EQ(log.find("partNumber=4"), std::string::npos) << log;
}

// Peak memory stays far below the object size: bodies stream to disk.
TEST_F(ClientTest, MemoryStaysBoundedOnALargeTransfer) {
  auto settings = testing::fast_retries();
  settings.part_size = 8 << 20;
  settings.parallel_download_threshold = 16 << 20;
  settings.multipart_upload_threshold = 16 << 20;
  const std::size_t size = 160u << 20;
  {
    std::ofstream out(scratch_ / "large.bin", std::ios::binary);
    const std::string block = random_bytes(1 << 20, 3);
    for (std::size_t written = 0; written < size; written += block.size()) out << block;
  }
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  Client client(testing::test_connection(server_.endpoint()), settings);
  client.upload(S3Server::kBucket, {{scratch_ / "large.bin", "large.bin"}});
  const auto head = client.head(S3Server::kBucket, "large.bin");
  ASSERT_TRUE(head);
  client.download(S3Server::kBucket, {{*head, scratch_ / "large.copy"}});
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_EQ(fs::file_size(scratch_ / "large.copy"), size);
  // The bound in client.h: 4 transfers x (128 KiB + 1 MiB + 64 KiB), plus thread stacks and slack.
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 48 * 1024) << "KiB of peak RSS growth";
}

TEST_F(ClientTest, RejectedCredentialsAreAPermanentUsageErrorWithoutTheSecret) {
  s3::Connection connection = testing::test_connection(server_.endpoint());
  connection.credentials = {"NOT-A-KEY", "the-secret-value", "", "test file"};
  try {
    Client(connection, testing::fast_retries()).list(S3Server::kBucket, "");
    FAIL() << "an unknown access key was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    const std::string message = error.what();
    EXPECT_NE(message.find("HTTP 403"), std::string::npos) << message;
    EXPECT_NE(message.find("test file"), std::string::npos) << message;  // where the keys came from
    EXPECT_EQ(message.find("the-secret-value"), std::string::npos) << message;
  }
}

TEST_F(ClientTest, RangesOfALargeObjectResumeAfterFaults) {
  auto settings = testing::fast_retries();
  settings.part_size = 5 << 20;
  settings.parallel_download_threshold = 6 << 20;
  const std::string content = random_bytes((11 << 20) + 7, 9);
  Client direct(testing::test_connection(server_.endpoint()), settings);
  const ObjectInfo stored = put(direct, scratch_, "big/faulty.bin", content);
  FaultProxy proxy(server_.port(), R"([{"method": "GET", "fault": "reset", "times": 2},
                                       {"method": "GET", "fault": "truncate", "times": 1},
                                       {"method": "GET", "fault": "503", "times": 1}])");
  Client client(testing::test_connection(proxy.endpoint()), settings);
  client.download(S3Server::kBucket, {{stored, scratch_ / "faulty.bin"}});
  EXPECT_TRUE(read_all(scratch_ / "faulty.bin") == content);
  const std::string log = proxy.requests();
  EXPECT_GE(std::count(log.begin(), log.end(), '\n'), 3 + 4) << log;  // 3 ranges + 4 faults
}

TEST_F(ClientTest, CorruptedRangeMakesTheObjectComeAgainWhole) {
  auto settings = testing::fast_retries();
  settings.part_size = 5 << 20;
  settings.parallel_download_threshold = 6 << 20;
  const std::string content = random_bytes((11 << 20) + 3, 4);
  Client direct(testing::test_connection(server_.endpoint()), settings);
  const ObjectInfo stored = put(direct, scratch_, "big/corrupt.bin", content);
  ASSERT_TRUE(etag_is_md5(stored.etag));
  FaultProxy proxy(server_.port(), R"([{"method": "GET", "fault": "corrupt", "times": 1}])");
  Client client(testing::test_connection(proxy.endpoint()), settings);
  client.download(S3Server::kBucket, {{stored, scratch_ / "corrupt.bin"}});
  EXPECT_TRUE(read_all(scratch_ / "corrupt.bin") == content);
  EXPECT_NE(proxy.requests().find("GET /test-bucket/big/corrupt.bin - -"), std::string::npos)
      << proxy.requests();
}

TEST(TlsTest, VerifiesCertificatesAndAcceptsACustomCa) {
  S3Server server(/*tls=*/true);
  s3::Connection connection = testing::test_connection(server.endpoint());
  try {
    Client(connection, testing::fast_retries()).list(S3Server::kBucket, "");
    FAIL() << "a self-signed certificate was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_NE(std::string(error.what()).find("AWS_CA_BUNDLE"), std::string::npos) << error.what();
  }
  connection.ca_bundle = server.certificate().string();
  EXPECT_TRUE(Client(connection, testing::fast_retries()).list(S3Server::kBucket, "").objects.empty());
}

class FaultTest : public ClientTest {
 protected:
  // Uploads straight to s3rver, then returns a client that talks through a proxy with these faults.
  std::unique_ptr<Client> client_through(const std::string& rules, std::unique_ptr<FaultProxy>& proxy,
                                         TransferSettings settings = testing::fast_retries()) {
    proxy = std::make_unique<FaultProxy>(server_.port(), rules);
    return std::make_unique<Client>(testing::test_connection(proxy->endpoint()), settings);
  }
  ObjectInfo object() const { return {"data/object.bin", content_.size(), md5_hex_}; }
  // The offset the first Range request asked from (0 if none): where a cut download resumed.
  std::uint64_t resumed_from(const std::string& log) const {
    const auto at = log.find(" bytes=");
    return at == std::string::npos ? 0 : std::stoull(log.substr(at + 7));
  }
  int count(const std::string& log, const std::string& needle) const {
    int found = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++found;
    return found;
  }

  const std::string content_ = random_bytes(300000, 11);
  const std::string md5_hex_ = [this] {
    Client direct(testing::test_connection(server_.endpoint()), testing::fast_retries());
    return put(direct, scratch_, "data/object.bin", content_).etag;
  }();
};

TEST_F(FaultTest, RetriesServerErrorsAndSlowDown) {
  std::unique_ptr<FaultProxy> proxy;
  auto client = client_through(
      R"([{"method": "GET", "fault": "503", "times": 2}, {"method": "GET", "fault": "slowdown", "times": 1},
          {"method": "GET", "fault": "429", "times": 1}])",
      proxy);
  client->download(S3Server::kBucket, {{object(), scratch_ / "got.bin"}});
  EXPECT_TRUE(read_all(scratch_ / "got.bin") == content_);
  EXPECT_EQ(count(proxy->requests(), "GET /test-bucket/data/object.bin"), 5);
}

TEST_F(FaultTest, ResumesResetAndTruncatedBodiesWithRange) {
  for (const std::string fault : {"reset", "truncate"}) {
    std::unique_ptr<FaultProxy> proxy;
    auto client = client_through(R"([{"method": "GET", "fault": ")" + fault + R"(", "times": 1}])", proxy);
    client->download(S3Server::kBucket, {{object(), scratch_ / ("got-" + fault)}});
    EXPECT_TRUE(read_all(scratch_ / ("got-" + fault)) == content_) << fault;
    const std::string log = proxy->requests();
    EXPECT_GT(resumed_from(log), 0u) << fault << "\n" << log;  // resumed, not restarted
  }
}

TEST_F(FaultTest, StalledTransferTimesOutAndResumes) {
  std::unique_ptr<FaultProxy> proxy;
  auto client = client_through(R"([{"method": "GET", "fault": "stall", "times": 1}])", proxy);
  client->download(S3Server::kBucket, {{object(), scratch_ / "got.bin"}});
  EXPECT_TRUE(read_all(scratch_ / "got.bin") == content_);
  EXPECT_GT(resumed_from(proxy->requests()), 0u) << proxy->requests();
}

TEST_F(FaultTest, CorruptedBodyFailsMd5AndIsFetchedAgain) {
  std::unique_ptr<FaultProxy> proxy;
  auto client = client_through(R"([{"method": "GET", "fault": "corrupt", "times": 1}])", proxy);
  client->download(S3Server::kBucket, {{object(), scratch_ / "got.bin"}});
  EXPECT_TRUE(read_all(scratch_ / "got.bin") == content_);
  EXPECT_EQ(count(proxy->requests(), "GET /test-bucket/data/object.bin - "), 2);
}

TEST_F(FaultTest, PersistentFailureIsRetryableAndNamesKeyAndCause) {
  std::unique_ptr<FaultProxy> proxy;
  auto client = client_through(R"([{"method": "GET", "fault": "bad_checksum", "times": -1}])", proxy);
  try {
    client->download(S3Server::kBucket, {{object(), scratch_ / "got.bin"}});
    FAIL() << "a wrong checksum was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::network);
    EXPECT_TRUE(is_retryable(error.code()));
    const std::string message = error.what();
    EXPECT_NE(message.find("s3://test-bucket/data/object.bin"), std::string::npos) << message;
    EXPECT_NE(message.find("x-amz-checksum"), std::string::npos) << message;
    EXPECT_NE(message.find("5 attempts"), std::string::npos) << message;
    EXPECT_EQ(message.find("S3RVER"), std::string::npos) << "the secret must not appear";
  }
  EXPECT_FALSE(fs::exists(scratch_ / "got.bin"));
  for (const auto& entry : fs::directory_iterator(scratch_.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
        << "temporary file left behind";
  }
}

TEST_F(FaultTest, RetriesUploadsAndListings) {
  std::unique_ptr<FaultProxy> proxy;
  auto client = client_through(R"([{"method": "PUT", "fault": "503", "times": 2},
                                   {"method": "GET", "path_contains": "list-type", "fault": "reset", "times": 1}])",
                               proxy);
  put(*client, scratch_, "data/second.bin", "second");
  EXPECT_EQ(client->list(S3Server::kBucket, "data/").objects.size(), 2u);
  EXPECT_EQ(count(proxy->requests(), "PUT /test-bucket/data/second.bin"), 3);
}

}  // namespace
}  // namespace tp::s3
