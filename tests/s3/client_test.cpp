// The client against a real S3 server (MinIO) and through a proxy that injects faults.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "common/error.h"
#include "s3/checksums.h"
#include "s3/client.h"
#include "s3_server.h"
#include "support/process.h"
#include "support/small_disk.h"

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

// What the server keeps with an object, asked with checksum mode by curl (another client): its headers.
std::string stored_checksum_headers(const S3Server& server, const std::string& key) {
  return testing::run_checked("curl -sS --fail -I --aws-sigv4 aws:amz:us-east-1:s3 --user " +
                              std::string(S3Server::kAccessKey) + ":" + S3Server::kSecretKey +
                              " -H 'x-amz-checksum-mode: ENABLED' " + server.endpoint() + "/" + S3Server::kBucket +
                              "/" + key + " | tr -d '\\r' | tr 'A-Z' 'a-z'");
}

std::string crc64nvme_base64(const std::string& content) {
  Digest digest(Digest::Algorithm::crc64nvme);
  digest.update(content.data(), content.size());
  return base64(digest.finish());
}

// Uploads send a CRC64NVME that the server keeps (full-object for a multipart upload, so it does not depend
// on the part size); downloads then verify that checksum, in one piece and from ranges.
TEST_F(ClientTest, UploadsKeepACrc64nvmeThatDownloadsVerify) {
  auto settings = testing::fast_retries();
  settings.part_size = 5 << 20;
  settings.parallel_download_threshold = 6 << 20;
  settings.multipart_upload_threshold = 6 << 20;
  Client client(testing::test_connection(server_.endpoint()), settings);
  const std::string small = random_bytes(100 << 10, 11), large = random_bytes((12 << 20) + 5, 12);
  put(client, scratch_, "sums/small.bin", small);
  put(client, scratch_, "sums/large.bin", large);

  std::string expected = crc64nvme_base64(small);
  std::transform(expected.begin(), expected.end(), expected.begin(), ::tolower);
  EXPECT_NE(stored_checksum_headers(server_, "sums/small.bin").find("x-amz-checksum-crc64nvme: " + expected),
            std::string::npos);
  const std::string large_headers = stored_checksum_headers(server_, "sums/large.bin");
  expected = crc64nvme_base64(large);
  std::transform(expected.begin(), expected.end(), expected.begin(), ::tolower);
  EXPECT_NE(large_headers.find("x-amz-checksum-crc64nvme: " + expected), std::string::npos) << large_headers;
  EXPECT_NE(large_headers.find("x-amz-checksum-type: full_object"), std::string::npos) << large_headers;

  // Every checksum the server sends made wrong: each download fails on it, naming it, in one piece and
  // from ranges (where the ranges' CRCs are combined and then the object comes again whole).
  FaultProxy proxy(server_.port(), R"([{"method": "GET", "fault": "bad_checksum", "times": -1},
                                       {"method": "HEAD", "fault": "bad_checksum", "times": -1}])");
  Client checked(testing::test_connection(proxy.endpoint()), settings);
  for (const std::string key : {"sums/small.bin", "sums/large.bin"}) {
    const auto head = client.head(S3Server::kBucket, key);
    ASSERT_TRUE(head);
    try {
      checked.download(S3Server::kBucket, {{*head, scratch_ / "got.bin"}});
      ADD_FAILURE() << key << ": a wrong checksum was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("does not match x-amz-checksum"), std::string::npos) << error.what();
    }
    client.download(S3Server::kBucket, {{*head, scratch_ / "got.bin"}});
    EXPECT_TRUE(read_all(scratch_ / "got.bin") == (key == "sums/small.bin" ? small : large)) << key;
  }
}

// A large object whose ranges' CRCs combine into its stored one comes as one range per connection; one
// verified by the MD5 in its ETag (uploaded by curl, without a checksum) in part-size ranges, which land in
// order while the rest download, so the MD5 keeps up.
TEST_F(ClientTest, ALargeObjectComesAsOneRangePerConnectionUnlessItsMd5IsTakenInOrder) {
  auto settings = testing::fast_retries();
  settings.parallelism = 4;
  settings.part_size = 5 << 20;
  settings.parallel_download_threshold = 6 << 20;
  const std::string content = random_bytes((40 << 20) + 3, 21);
  Client direct(testing::test_connection(server_.endpoint()), settings);
  const ObjectInfo with_crc = put(direct, scratch_, "ranges/crc.bin", content);
  const std::string file = (scratch_ / "upload.bin").string();  // the content, as put() left it
  const std::string url = server_.endpoint() + "/" + S3Server::kBucket + "/ranges/md5.bin";
  testing::run_checked("curl -sS --fail --aws-sigv4 aws:amz:us-east-1:s3 --user " +
                       std::string(S3Server::kAccessKey) + ":" + S3Server::kSecretKey +
                       " -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T " + file + " " + url);
  const auto with_md5 = direct.head(S3Server::kBucket, "ranges/md5.bin");
  ASSERT_TRUE(with_md5);
  ASSERT_TRUE(etag_is_md5(with_md5->etag)) << with_md5->etag;

  FaultProxy proxy(server_.port(), "[]");
  Client client(testing::test_connection(proxy.endpoint()), settings);
  client.download(S3Server::kBucket, {{with_crc, scratch_ / "crc.bin"}, {*with_md5, scratch_ / "md5.bin"}});
  EXPECT_TRUE(read_all(scratch_ / "crc.bin") == content);
  EXPECT_TRUE(read_all(scratch_ / "md5.bin") == content);
  const std::string log = proxy.requests();
  auto ranged_gets = [&](const std::string& key) {
    std::istringstream lines(log);
    int count = 0;
    for (std::string line; std::getline(lines, line);) {
      count += line.rfind("GET /" + std::string(S3Server::kBucket) + "/" + key + " bytes=", 0) == 0;
    }
    return count;
  };
  EXPECT_EQ(ranged_gets("ranges/crc.bin"), 4) << log;  // 40 MiB + 3 in 4 ranges of 10 MiB + 1
  EXPECT_NE(log.find("ranges/crc.bin bytes=0-10485760 "), std::string::npos) << log;
  EXPECT_EQ(ranged_gets("ranges/md5.bin"), 9) << log;  // in 5 MiB ranges
}

// A download that fills the disk: a storage error naming the file and the full disk, and nothing left
// behind, a large object's ranges and a whole object alike.
TEST_F(ClientTest, ADownloadThatFillsTheDiskIsAStorageErrorAndLeavesNoFile) {
  testing::SmallDisk disk(scratch_ / "small", "4m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)";
  auto settings = testing::fast_retries();
  settings.part_size = 5 << 20;
  settings.parallel_download_threshold = 6 << 20;
  Client client(testing::test_connection(server_.endpoint()), settings);
  for (const std::size_t size : {std::size_t{12} << 20, std::size_t{5} << 20}) {
    const ObjectInfo stored = put(client, scratch_, "full/blob.bin", random_bytes(size, 5));
    try {
      client.download(S3Server::kBucket, {{stored, scratch_ / "small" / "blob.bin"}});
      ADD_FAILURE() << size << " bytes fitted on a 4 MiB disk";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::storage) << error.what();
      EXPECT_NE(std::string(error.what()).find("full/blob.bin"), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find(std::strerror(ENOSPC)), std::string::npos) << error.what();
    }
    EXPECT_TRUE(fs::is_empty(scratch_ / "small")) << size;
  }
}

// A bucket with versioning (enabled with mc): an overwritten key lists once and downloads as its newest
// version, a deleted key is gone from the listing, and the server still holds the older versions.
TEST_F(ClientTest, AVersionedBucketServesTheNewestVersion) {
  testing::run_checked(server_.mc(std::string("version enable tp/") + S3Server::kBucket));
  Client client(testing::test_connection(server_.endpoint()), testing::fast_retries());
  put(client, scratch_, "versioned/a.txt", "first");
  put(client, scratch_, "versioned/a.txt", "second");
  put(client, scratch_, "versioned/b.txt", "deleted");
  client.remove(S3Server::kBucket, "versioned/b.txt");
  const Listing listing = client.list(S3Server::kBucket, "versioned/");
  ASSERT_EQ(listing.objects.size(), 1u);
  EXPECT_EQ(listing.objects[0].key, "versioned/a.txt");
  client.download(S3Server::kBucket, {{listing.objects[0], scratch_ / "a.txt"}});
  EXPECT_EQ(read_all(scratch_ / "a.txt"), "second");
  const std::string versions =
      testing::run_checked(server_.mc(std::string("ls --versions tp/") + S3Server::kBucket + "/versioned/"));
  EXPECT_EQ(std::count(versions.begin(), versions.end(), '\n'), 4) << versions;  // 2 of a, b and its deletion
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
  // Uploads straight to MinIO, then returns a client that talks through a proxy with these faults.
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
    EXPECT_EQ(message.find(S3Server::kSecretKey), std::string::npos) << "the secret must not appear";
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

// An upload whose bytes are damaged on the way (the proxy flips a byte of the body it forwards) is refused by
// MinIO against the CRC64NVME header, whole and as one part of a multipart upload, and sent again: what is
// stored is what was sent. The payload is not signed, so without the checksum the damaged bytes would be kept.
TEST_F(FaultTest, AnUploadDamagedOnItsWayIsRefusedByItsChecksumAndSentAgain) {
  auto settings = testing::fast_retries();
  settings.part_size = 5 << 20;
  settings.multipart_upload_threshold = 6 << 20;
  std::unique_ptr<FaultProxy> proxy;
  auto client = client_through(R"([{"method": "PUT", "path_contains": "damaged/small.bin", "fault": "corrupt_request", "times": 1},
                                   {"method": "PUT", "path_contains": "partNumber=2", "fault": "corrupt_request", "times": 1}])",
                               proxy, settings);
  const std::string small = random_bytes(100 << 10, 21), large = random_bytes((12 << 20) + 3, 22);
  put(*client, scratch_, "damaged/small.bin", small);
  put(*client, scratch_, "damaged/large.bin", large);

  const std::string log = proxy->requests();
  EXPECT_EQ(count(log, "PUT /test-bucket/damaged/small.bin - corrupt_request"), 1) << log;
  EXPECT_EQ(count(log, "PUT /test-bucket/damaged/small.bin - -"), 1) << log;
  EXPECT_EQ(count(log, "partNumber=2&uploadId="), 2) << log;
  Client direct(testing::test_connection(server_.endpoint()), settings);
  for (const auto& [key, content] : {std::pair{"damaged/small.bin", &small}, std::pair{"damaged/large.bin", &large}}) {
    const auto head = direct.head(S3Server::kBucket, key);
    ASSERT_TRUE(head) << key;
    direct.download(S3Server::kBucket, {{*head, scratch_ / "got.bin"}});
    EXPECT_TRUE(read_all(scratch_ / "got.bin") == *content) << key << ": the damaged bytes were kept";
  }
}

}  // namespace
}  // namespace tp::s3
