// NodeCache: the ranks of a node (here caches of one directory: flock locks belong to open files, so two caches
// of one process conflict as two processes do, and real child processes) fetch each object once, stay within
// the node's capacity, and survive a rank killed while holding an object or in the middle of its download.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "s3/node_cache.h"
#include "s3/streaming.h"
#include "s3_server.h"
#include "support/temp_dir.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;
using testing::bytes_in;
using testing::read_text;
using testing::S3Server;

// The temporary files of downloads of `file` in its directory.
std::vector<fs::path> temporaries_of(const fs::path& file) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(file.parent_path())) {
    if (entry.path().filename().string().rfind("." + file.filename().string() + ".tmp-", 0) == 0) {
      found.push_back(entry.path());
    }
  }
  return found;
}

// A child process that runs `body` and exits with its result (0: it held), killed with SIGKILL if still there
// at the end of the test.
class Child {
 public:
  template <typename Body>
  explicit Child(Body body) {
    pid_ = ::fork();
    if (pid_ == 0) {
      int code = 1;
      try {
        code = body();
      } catch (const std::exception& error) {
        std::fprintf(stderr, "child: %s\n", error.what());
      }
      ::_exit(code);
    }
  }
  ~Child() {
    if (pid_ > 0) kill();
  }
  // SIGKILL, and the exit status reaped.
  int kill() {
    ::kill(pid_, SIGKILL);
    return wait();
  }
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

// A pipe for a child to say that it got somewhere, and for the test to wait for that.
class Signal {
 public:
  Signal() { EXPECT_EQ(::pipe(fds_), 0); }
  ~Signal() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  void send() { EXPECT_EQ(::write(fds_[1], "x", 1), 1); }
  // False when nothing came within a minute (the sender failed).
  bool received() {
    pollfd ready{fds_[0], POLLIN, 0};
    char byte;
    return ::poll(&ready, 1, 60000) == 1 && ::read(fds_[0], &byte, 1) == 1;
  }

 private:
  int fds_[2] = {-1, -1};
};

class NodeCacheTest : public ::testing::Test {
 protected:
  // `count` objects of `size` bytes (each its own letter) under "shards/", behind a fault proxy with `rules`.
  void upload(int count, std::size_t size, const std::string& rules = "[]") {
    std::vector<UploadItem> uploads;
    for (int i = 0; i < count; ++i) {
      contents_.push_back(std::string(size, static_cast<char>('a' + i % 26)));
      contents_.back().replace(0, std::to_string(i).size(), std::to_string(i));
      testing::write_text(scratch_ / "src" / std::to_string(i), contents_.back());
      uploads.push_back({scratch_ / "src" / std::to_string(i), fmt::format("shards/{:03}.tar", i)});
    }
    Client(testing::test_connection(server_.endpoint()), testing::fast_retries()).upload(S3Server::kBucket, uploads);
    proxy_ = std::make_unique<testing::FaultProxy>(server_.port(), rules);
    objects_ = client()->list(S3Server::kBucket, "shards/").objects;
    ASSERT_EQ(objects_.size(), static_cast<std::size_t>(count));
    for (const auto& object : objects_) paths_.push_back(fs::path(object.key).filename());
  }
  std::unique_ptr<Client> client(std::chrono::seconds stall_timeout = std::chrono::seconds(1)) const {
    auto settings = testing::fast_retries();
    settings.http.stall_timeout = stall_timeout;
    return std::make_unique<Client>(testing::test_connection(proxy_->endpoint()), settings);
  }
  // A rank's view of the node's cache in `directory_`.
  std::shared_ptr<NodeCache> node(Client& client, std::uint64_t capacity) const {
    return std::make_shared<NodeCache>(client, S3Server::kBucket, objects_, paths_, directory_, capacity);
  }
  std::uint64_t object_size() const { return objects_.front().size; }
  // GETs of each object that the proxy saw.
  std::map<std::string, int> gets() const {
    std::map<std::string, int> count;
    std::istringstream log(proxy_->requests());
    for (std::string method, path, range, fault; log >> method >> path >> range >> fault;) {
      if (method == "GET" && path.find("list-type") == std::string::npos) ++count[path];
    }
    return count;
  }
  int gets_of(std::size_t index) const {
    const auto all = gets();
    const auto found = all.find("/test-bucket/" + objects_[index].key);
    return found == all.end() ? 0 : found->second;
  }
  // Reads every object in `order` through a rank's prefetch cache of the node's cache; the number read right.
  std::size_t read_through(const std::shared_ptr<NodeCache>& node, const std::vector<std::size_t>& order,
                           const std::function<void()>& after_each = {}) const {
    PrefetchCache::Options options;
    options.lookahead = 4;
    options.patience = std::chrono::minutes(2);  // the bound holds: no reader goes past it within the test
    PrefetchCache cache(node, options);
    cache.set_order(order);
    std::size_t right = 0;
    for (const std::size_t index : order) {
      const fs::path path = cache.acquire(index);
      if (read_text(path) == contents_[index]) ++right;
      if (after_each) after_each();
      cache.release(index);
    }
    return right;
  }
  // Waits until the proxy has seen a request whose log line holds `text` (a minute at most).
  void wait_for_request(const std::string& text) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (proxy_->requests().find(text) == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no request " << text << ":\n" << proxy_->requests();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  S3Server server_;
  testing::TempDir scratch_;
  fs::path directory_ = scratch_ / "node";
  std::unique_ptr<testing::FaultProxy> proxy_;
  std::vector<std::string> contents_;
  std::vector<ObjectInfo> objects_;
  std::vector<fs::path> paths_;
};

std::vector<std::size_t> shuffled(std::size_t count, unsigned seed) {
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  return order;
}

// Two ranks of a node reading the same shards at once: each shard downloaded once, found or waited for by the
// other rank.
TEST_F(NodeCacheTest, TwoRanksOfANodeFetchEachShardOnce) {
  upload(12, 20000);
  const auto first_client = client();
  const auto second_client = client();
  const auto first = node(*first_client, 1 << 20);
  const auto second = node(*second_client, 1 << 20);
  std::size_t second_right = 0;
  std::thread other([&] { second_right = read_through(second, shuffled(12, 2)); });
  EXPECT_EQ(read_through(first, shuffled(12, 1)), 12u);
  other.join();
  EXPECT_EQ(second_right, 12u);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(gets_of(i), 1) << objects_[i].key << "\n" << proxy_->requests();
}

// The same with the second rank a real process.
TEST_F(NodeCacheTest, ARankInAnotherProcessFetchesNoShardTwice) {
  upload(12, 20000);
  Signal go;
  Child child([&] {
    if (!go.received()) return 3;
    const auto own_client = client();
    return read_through(node(*own_client, 1 << 20), shuffled(12, 4)) == 12 ? 0 : 2;
  });
  const auto own_client = client();
  const auto cache = node(*own_client, 1 << 20);
  go.send();
  EXPECT_EQ(read_through(cache, shuffled(12, 3)), 12u);
  const int status = child.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(gets_of(i), 1) << objects_[i].key << "\n" << proxy_->requests();
}

// A rank killed while it holds a shard: until then the shard is not evicted, whatever room the others want;
// once the kernel has dropped its locks, the others evict it as any unheld file.
TEST_F(NodeCacheTest, ARankKilledWhileHoldingAShardBlocksNobody) {
  upload(4, 20000);
  Signal held;
  Child child([&] {
    const auto own_client = client();
    const auto cache = node(*own_client, 2 * object_size());
    auto hold = cache->fetch(0, NodeCache::Room::capacity);
    if (!hold) return 2;
    held.send();
    ::pause();  // holds it until killed
    return 0;
  });
  ASSERT_TRUE(held.received());
  const auto own_client = client();
  const auto cache = node(*own_client, 2 * object_size());
  auto first = cache->fetch(1, NodeCache::Room::capacity);
  ASSERT_TRUE(first);
  // The node holds two shards, its capacity: no room for a third, and the held files stay.
  EXPECT_FALSE(cache->fetch(2, NodeCache::Room::capacity));
  EXPECT_EQ(read_text(cache->path(0)), contents_[0]);
  EXPECT_EQ(read_text(cache->path(1)), contents_[1]);

  const int status = child.kill();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  auto third = cache->fetch(2, NodeCache::Room::capacity);
  ASSERT_TRUE(third);
  EXPECT_FALSE(fs::exists(cache->path(0)));  // the dead rank's shard made the room
  EXPECT_EQ(read_text(cache->path(1)), contents_[1]);
  EXPECT_EQ(read_text(cache->path(2)), contents_[2]);
  EXPECT_LE(bytes_in(directory_), 2 * object_size());
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(gets_of(i), 1) << objects_[i].key;
}

// A rank killed in the middle of a download (the proxy stalls its body): no partial file under the shard's
// name, the others do not wait for the dead rank, and the next reader downloads the shard whole and removes
// what the dead one left.
TEST_F(NodeCacheTest, ARankKilledMidDownloadLeavesNoPartialShard) {
  upload(3, 3 << 20, R"([{"method": "GET", "path_contains": "shards/001.tar", "fault": "stall", "times": 1}])");
  Child child([&] {
    const auto own_client = client(std::chrono::seconds(120));  // waits out the stall
    const auto cache = node(*own_client, 8 * object_size());
    return cache->fetch(1, NodeCache::Room::capacity) ? 0 : 2;
  });
  wait_for_request(" stall\n");
  const fs::path file = directory_ / paths_[1];
  EXPECT_FALSE(fs::exists(file));
  EXPECT_EQ(temporaries_of(file).size(), 1u);  // the download in flight
  const int status = child.kill();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_FALSE(fs::exists(file));

  const auto own_client = client();
  const auto cache = node(*own_client, 8 * object_size());
  // The dead rank's reservation and temporary file count for nothing once its locks are gone: room for all.
  auto other = cache->fetch(0, NodeCache::Room::capacity);
  ASSERT_TRUE(other);
  auto hold = cache->fetch(1, NodeCache::Room::capacity);
  ASSERT_TRUE(hold);
  EXPECT_EQ(read_text(file), contents_[1]);
  EXPECT_TRUE(temporaries_of(file).empty());
  EXPECT_EQ(gets_of(1), 2);
}

// The bound: 4 ranks go through 20 shards each (in orders of their own) with room for 3 in the node; at no
// moment does the directory hold more than the capacity and one shard, and every read is the shard's bytes.
TEST_F(NodeCacheTest, RanksReadingThroughAFewShardsOfRoomStayWithinTheBound) {
  upload(20, 10000);
  const std::uint64_t capacity = 3 * object_size() + object_size() / 2;
  std::atomic<std::uint64_t> most{0};
  const auto note = [&] {
    std::uint64_t now = bytes_in(directory_);
    for (std::uint64_t seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
  };
  // Sampled every 200 us besides after each read: often enough to see a shard in flight, without a core of
  // its own (a watcher that never slept took one from the ranks on a loaded machine).
  std::atomic<bool> reading{true};
  std::thread watcher([&] {
    while (reading) {
      note();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::shared_ptr<NodeCache>> caches;
  for (int rank = 0; rank < 4; ++rank) {
    clients.push_back(client());
    caches.push_back(node(*clients.back(), capacity));
  }
  std::vector<std::size_t> right(4, 0);
  std::vector<std::thread> ranks;
  for (std::size_t rank = 0; rank < 4; ++rank) {
    ranks.emplace_back([&, rank] { right[rank] = read_through(caches[rank], shuffled(20, 10 + rank), note); });
  }
  for (auto& rank : ranks) rank.join();
  reading = false;
  watcher.join();
  for (std::size_t rank = 0; rank < 4; ++rank) EXPECT_EQ(right[rank], 20u) << rank;
  EXPECT_LE(most.load(), capacity + object_size());
  EXPECT_GE(most.load(), 2 * object_size());  // the room was used
  EXPECT_LE(bytes_in(directory_), capacity + object_size());
}

// A reader that finds no room while its own rank holds shards fetched ahead gives up those it does not read
// next, and gets its shard at once: here the reader wants a shard out of the order (its rank holds the order's
// first two) while another rank holds the rest of the room.
TEST_F(NodeCacheTest, AReaderWithoutRoomGivesUpItsWindowBeyondTheNextShard) {
  upload(8, 20000);
  const std::uint64_t capacity = 3 * object_size();
  const auto other_client = client();
  const auto other = node(*other_client, capacity);
  auto other_first = other->fetch(7, NodeCache::Room::capacity);
  ASSERT_TRUE(other_first);
  const auto own_client = client();
  PrefetchCache::Options options;
  options.lookahead = 2;
  options.patience = std::chrono::minutes(2);
  PrefetchCache cache(node(*own_client, capacity), options);
  cache.set_order({0, 1, 2, 3});
  // The window: 0 and 1 fetched ahead, the capacity full.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (gets_of(0) + gets_of(1) < 2 || bytes_in(directory_) < capacity) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << proxy_->requests();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The other rank's reader takes the room over the capacity: the node holds all its bound.
  auto other_second = other->fetch(6, NodeCache::Room::one_over);
  ASSERT_TRUE(other_second);
  const auto start = std::chrono::steady_clock::now();
  const fs::path path = cache.acquire(5);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));  // not the patience
  EXPECT_EQ(read_text(path), contents_[5]);
  cache.release(5);
  EXPECT_TRUE(fs::exists(directory_ / paths_[0]));  // the next shard of the order, kept
  EXPECT_FALSE(fs::exists(directory_ / paths_[1]));
  EXPECT_LE(bytes_in(directory_), capacity + object_size());
  EXPECT_EQ(read_text(cache.acquire(0)), contents_[0]);
  EXPECT_EQ(gets_of(0), 1);
  cache.release(0);
}

// While a reader of the node waits for room, nothing is fetched ahead into room (what is in is still found), and
// the reader's own fetch may go one shard over the capacity.
TEST_F(NodeCacheTest, NothingIsFetchedAheadIntoTheRoomAWaitingReaderNeeds) {
  upload(3, 20000);
  const auto own_client = client();
  const auto cache = node(*own_client, 2 * object_size());
  const auto other_client = client();
  const auto other = node(*other_client, 2 * object_size());
  auto first = other->fetch(0, NodeCache::Room::capacity);
  ASSERT_TRUE(first);
  EXPECT_FALSE(cache->readers_waiting());
  std::optional<NodeCache::Hold> read;
  {
    const NodeCache::Hold waiting = other->waiting_for_room();
    EXPECT_TRUE(cache->readers_waiting());
    EXPECT_FALSE(cache->fetch(1, NodeCache::Room::capacity));  // room for it, but a reader waits
    EXPECT_TRUE(cache->fetch(0, NodeCache::Room::capacity));   // in already: no room taken
    read = other->fetch(1, NodeCache::Room::one_over);
    ASSERT_TRUE(read);
  }
  EXPECT_FALSE(cache->readers_waiting());
  EXPECT_FALSE(cache->fetch(2, NodeCache::Room::capacity));  // the capacity is full and held
  EXPECT_EQ(gets_of(2), 0);
}

// A reader that waits for room that the node's other ranks keep (here a rank that holds it and does not read on,
// as one waiting in a collective) gets its shard once it has waited its patience, past the bound.
TEST_F(NodeCacheTest, AReaderPastItsPatienceGetsItsShardPastTheBound) {
  upload(3, 20000);
  const auto other_client = client();
  const auto other = node(*other_client, object_size());
  auto first = other->fetch(0, NodeCache::Room::capacity);
  auto second = other->fetch(1, NodeCache::Room::one_over);
  ASSERT_TRUE(first && second);
  const auto own_client = client();
  PrefetchCache::Options options;
  options.lookahead = 1;
  options.patience = std::chrono::milliseconds(300);
  PrefetchCache cache(node(*own_client, object_size()), options);
  cache.set_order({2});
  const auto start = std::chrono::steady_clock::now();
  const fs::path path = cache.acquire(2);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, options.patience);
  EXPECT_LT(waited, std::chrono::seconds(30));
  EXPECT_EQ(read_text(path), contents_[2]);
  EXPECT_EQ(bytes_in(directory_), 3 * object_size());  // the escape: past the capacity and one shard
  cache.release(2);
}

// A file under a shard's name with another size (left by something else than a complete download) is not taken
// for the shard: it is downloaded again.
TEST_F(NodeCacheTest, AFileOfAnotherSizeIsDownloadedAgain) {
  upload(2, 20000);
  fs::create_directories(directory_);
  testing::write_text(directory_ / paths_[0], "stale");
  const auto own_client = client();
  const auto cache = node(*own_client, 1 << 20);
  auto hold = cache->fetch(0, NodeCache::Room::capacity);
  ASSERT_TRUE(hold);
  EXPECT_EQ(read_text(cache->path(0)), contents_[0]);
  EXPECT_EQ(gets_of(0), 1);
  // A complete one is taken as it is.
  auto again = cache->fetch(0, NodeCache::Room::capacity);
  ASSERT_TRUE(again);
  EXPECT_EQ(gets_of(0), 1);
}

// The directory is named by the listing: objects packed again at the same prefix get another one, and the
// old one is removed once no process uses it.
TEST_F(NodeCacheTest, ADirectoryPerListingAndUnusedOnesRemoved) {
  const std::vector<ObjectInfo> listing = {{"p/a.tar", 10, "e1"}, {"p/b.tar", 20, "e2"}};
  std::vector<ObjectInfo> repacked = listing;
  repacked[1].etag = "e3";
  const fs::path parent = scratch_ / "stream";
  const fs::path old_directory = node_cache_directory(parent, "s3://b/p", listing);
  EXPECT_EQ(old_directory, node_cache_directory(parent, "s3://b/p", listing));
  EXPECT_NE(old_directory, node_cache_directory(parent, "s3://b/p", repacked));
  EXPECT_NE(old_directory, node_cache_directory(parent, "s3://b/q", listing));

  Client unused(testing::test_connection(server_.endpoint()));
  const fs::path held_directory = node_cache_directory(parent, "s3://b/held", listing);
  const auto held = std::make_shared<NodeCache>(unused, "b", listing, std::vector<fs::path>{"a.tar", "b.tar"},
                                                held_directory, 100);
  fs::create_directories(old_directory);
  testing::write_text(old_directory / "a.tar", "0123456789");
  const NodeCache fresh(unused, "b", repacked, {"a.tar", "b.tar"}, node_cache_directory(parent, "s3://b/p", repacked),
                        100);
  EXPECT_FALSE(fs::exists(old_directory));
  EXPECT_TRUE(fs::exists(held_directory));  // in use
}

}  // namespace
}  // namespace tp::s3
