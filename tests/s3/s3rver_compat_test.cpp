// s3rver, the npm S3 server scripts/demo runs on a plain Debian 12 machine (every other S3 test runs
// MinIO): the client lists, uploads, downloads (multipart too) and verifies against it.
#include <gtest/gtest.h>

#include <random>

#include "s3/client.h"
#include "support/background_process.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

TEST(S3rverCompat, ClientUploadsListsAndDownloadsVerified) {
  testing::TempDir directory;
  fs::create_directories(directory / "data");
  const int port = testing::free_port();
  // The legacy provider lets s3rver build continuation tokens (DES) on Node 20: paginated listings.
  testing::BackgroundProcess server(
      "env NODE_OPTIONS=--openssl-legacy-provider " +
          testing::shell_quote(testing::source_dir() + "/.deps/npm/node_modules/.bin/s3rver") + " -d " +
          testing::shell_quote((directory / "data").string()) + " -a 127.0.0.1 -p " + std::to_string(port) +
          " --configure-bucket demo --silent",
      directory / "s3rver.log");
  testing::wait_for_port(port);

  Connection connection;
  connection.endpoint = "http://127.0.0.1:" + std::to_string(port);
  connection.endpoint_source = "test";
  connection.region = "us-east-1";
  connection.path_style = true;
  connection.credentials = {"S3RVER", "S3RVER", "", "test"};  // s3rver's fixed keys
  TransferSettings settings;
  settings.multipart_upload_threshold = 5 << 20;
  settings.part_size = 5 << 20;
  settings.parallel_download_threshold = 5 << 20;
  Client client(connection, settings);

  std::mt19937 random(7);
  std::string large(12 << 20, '\0');
  for (auto& byte : large) byte = static_cast<char>(random());
  testing::write_text(directory / "large.bin", large);
  testing::write_text(directory / "small.txt", "small");
  client.upload("demo", {{directory / "large.bin", "set/large.bin"}, {directory / "small.txt", "set/small.txt"}});

  const Listing listing = client.list("demo", "set/");
  ASSERT_EQ(listing.objects.size(), 2u);
  client.download("demo", {{listing.objects[0], directory / "large.copy"}, {listing.objects[1], directory / "small.copy"}});
  EXPECT_EQ(testing::read_text(directory / "large.copy"), large);
  EXPECT_EQ(testing::read_text(directory / "small.copy"), "small");
}

}  // namespace
}  // namespace tp::s3
