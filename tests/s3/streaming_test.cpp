// PrefetchCache: reads in sampler order while objects are fetched ahead, on bounded disk.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <sstream>

#include "s3/streaming.h"
#include "s3_server.h"
#include "support/temp_dir.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;
using testing::bytes_in;
using testing::read_text;
using testing::S3Server;

TEST(StreamingTest, FetchesAheadInReadOrderWithinTheCapacity) {
  S3Server server;
  testing::TempDir scratch;
  std::vector<UploadItem> uploads;
  std::vector<std::string> contents;
  for (int i = 0; i < 24; ++i) {
    contents.push_back(std::string(10000, static_cast<char>('a' + i)));
    testing::write_text(scratch / "src" / std::to_string(i), contents.back());
    uploads.push_back({scratch / "src" / std::to_string(i), "stream/" + std::to_string(100 + i)});
  }
  Client(testing::test_connection(server.endpoint()), testing::fast_retries())
      .upload(S3Server::kBucket, uploads);

  testing::FaultProxy proxy(server.port(), "[]");
  auto settings = testing::fast_retries();
  settings.parallelism = 1;  // one fetch at a time, so the proxy sees the fetch order
  Client client(testing::test_connection(proxy.endpoint()), settings);
  std::vector<ObjectInfo> objects = client.list(S3Server::kBucket, "stream/").objects;
  ASSERT_EQ(objects.size(), 24u);
  std::vector<fs::path> paths;
  for (const auto& object : objects) paths.push_back(fs::path(object.key).filename());

  const fs::path cache_dir = scratch / "cache";
  PrefetchCache cache(client, S3Server::kBucket, objects, paths, cache_dir, {45000, 8});
  std::vector<std::size_t> order(objects.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  cache.set_order(order);

  for (const std::size_t index : order) {
    const fs::path path = cache.acquire(index);
    EXPECT_EQ(read_text(path),
              contents[static_cast<std::size_t>(std::stoi(objects[index].key.substr(7)) - 100)]);
    // The bound: the capacity, plus the one object a waiting reader may force in.
    EXPECT_LE(bytes_in(cache_dir), 45000u + 10000u);
    cache.release(index);
  }

  // Objects were fetched in the order they were read (each one once: the capacity held the window).
  std::istringstream log(proxy.requests());
  std::vector<std::string> fetched;
  for (std::string method, path, range, fault; log >> method >> path >> range >> fault;) {
    if (method == "GET" && path.find("list-type") == std::string::npos) fetched.push_back(path);
  }
  ASSERT_EQ(fetched.size(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(fetched[i], "/test-bucket/" + objects[order[i]].key);
  }
}

}  // namespace
}  // namespace tp::s3
