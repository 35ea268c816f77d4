// Streaming: training starts before staging ends. Objects are fetched ahead of the reader, in the order it
// will read them (the sampler's order), into a directory of bounded size; objects already read and not held
// by a reader are evicted least recently used first to make room. The directory is the rank's own, or the
// node's cache that the node's ranks share (s3/node_cache.h: packed shards).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "s3/client.h"
#include "s3/node_cache.h"

namespace tp::s3 {

class PrefetchCache {
 public:
  struct Options {
    std::uint64_t capacity_bytes = 8ull << 30;
    std::size_t lookahead = 256;  // objects fetched ahead of the reader, at most
    // Objects downloaded at once, at most (0: the client's parallelism). Whole shards: 1, so that the next one
    // lands first, each in parallel ranges. A node's cache fetches one at a time.
    std::size_t objects_per_fetch = 0;
    // A node's cache: how long a reader waits for room that the node's other ranks hold before its object is
    // fetched past the bound (with a warning). Ranks that wait for each other (a collective) while the ones
    // ahead hold the room must not wait for ever.
    std::chrono::milliseconds patience{10000};
  };

  // The rank's own directory: `objects[i]` is stored at `directory / relative_paths[i]`, within
  // options.capacity_bytes. The client must outlive the cache.
  PrefetchCache(Client& client, std::string bucket, std::vector<ObjectInfo> objects,
                std::vector<std::filesystem::path> relative_paths, std::filesystem::path directory,
                Options options);
  // The node's cache, shared with the node's other ranks (within its own capacity): this rank holds the objects
  // being read and those of its window (fetched ahead, not read yet), and the two it read last until a reader of
  // the node waits for room. A reader of this rank that finds no room gives up first the two read last, then the
  // window beyond the next object of the order; and while it waits no rank of the node fetches ahead into room
  // (NodeCache::Room::capacity). It gets its object past the bound only once it has waited options.patience.
  PrefetchCache(std::shared_ptr<NodeCache> node, Options options);
  ~PrefetchCache();
  PrefetchCache(const PrefetchCache&) = delete;
  PrefetchCache& operator=(const PrefetchCache&) = delete;

  // The order of the coming reads (indices into the objects), e.g. this rank's sampler order for an epoch.
  void set_order(std::vector<std::size_t> order);
  // Blocks until object `index` is on disk and returns its path, held until release(index). Rethrows the
  // fetch's tp::Error if it failed.
  std::filesystem::path acquire(std::size_t index);
  void release(std::size_t index);
  // Bytes of objects on disk now (a node's cache: the node's).
  std::uint64_t bytes_on_disk() const;

 private:
  enum class State { remote, fetching, local };
  struct Entry {
    State state = State::remote;
    int holders = 0;
    bool read = false;           // read at least once: may be evicted when not held
    std::uint64_t last_use = 0;  // for least-recently-used eviction
    NodeCache::Hold hold;        // a node's cache: this rank's hold while local
    // A node's cache: since when a reader waits for room for it (its first fetch that found none).
    std::optional<std::chrono::steady_clock::time_point> waiting_for_room_since;
  };
  // A node's cache: what this rank gives up when room is wanted.
  enum class Shed {
    nothing,
    recent,  // the objects read last that no reader holds
    window,  // those, and the window's objects beyond the next of the order that no reader holds
  };

  std::filesystem::path path(std::size_t index) const;
  void fetch_loop();
  // Evicts read, unheld objects (least recently used first) until `bytes` more fit; false if they cannot.
  bool make_room(std::uint64_t bytes);
  // A node's cache: fetches the next object a reader waits for, else the next of the window; false when there
  // is nothing to fetch.
  bool fetch_shared(std::unique_lock<std::mutex>& lock);
  // A node's cache: whether this rank still holds local object `index` after giving up `shed` (held by a reader,
  // in the window ahead, one of the two objects read last).
  bool keeps(std::size_t index, Shed shed) const;
  // A node's cache: lets go of the local objects this rank no longer keeps; true if it let go of any.
  bool let_go(Shed shed);
  void let_go_of(std::size_t index);
  // A node's cache: holds the node's waiting lock while a reader of this rank waits for room, and only then.
  void note_waiting();

  std::shared_ptr<NodeCache> node_;  // set for a node's cache
  Client* client_;
  std::string bucket_;
  std::vector<ObjectInfo> objects_;
  std::vector<std::filesystem::path> relative_paths_;
  std::filesystem::path directory_;
  Options options_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;
  std::vector<std::size_t> order_;
  std::vector<std::size_t> position_in_order_;
  std::size_t cursor_ = 0;                          // position in order_ of the next read
  std::vector<std::size_t> urgent_;                 // wanted now but not scheduled ahead
  std::map<std::uint64_t, std::size_t> evictable_;  // last use -> object: local, read and not held
  std::uint64_t bytes_on_disk_ = 0;
  std::uint64_t clock_ = 0;
  std::exception_ptr error_;
  bool stopping_ = false;
  bool fetcher_needs_room_ = false;  // the next object in the window waits for a release to evict something
  std::vector<std::size_t> held_;    // a node's cache: the local objects, which this rank holds
  std::size_t recent_[2] = {SIZE_MAX, SIZE_MAX};  // a node's cache: the objects acquired last, the last first
  NodeCache::Hold waiting_;  // a node's cache: held while a reader of this rank waits for room
  std::thread fetcher_;
};

}  // namespace tp::s3
