// One cache per node for objects streamed whole (packed shards): the ranks of a node, separate processes, share
// one directory, so each object is downloaded once per node, and the directory stays within one capacity for the
// node. Only locks the kernel releases when a process dies (flock(2)) and the files themselves are shared: a
// rank may start, crash or restart at any moment.
//
// Beside `directory` (which holds the objects at their relative paths, and whatever else the caller puts there):
//   <directory>.lock    held shared by every process using the directory, so that an unused one can be removed
//   <directory>.locks/  per object a hold lock (shared by the processes that hold the object: never deleted
//                       while held) and a fetch lock (exclusive while one process downloads the object; its
//                       content is the bytes it reserved, counted by the others until it lets go), the room
//                       lock, under which the directory's bytes are counted and files evicted, and the waiting
//                       lock, held shared by the readers that wait for room.
// The lock files stay; nothing under a live lock is deleted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "s3/client.h"

namespace tp::s3 {

// The node's cache directory under `parent` for a listing of `source`: named by a digest of the source and
// of every listed object's key, size and ETag, so that objects packed again under the same prefix never meet
// the files of the old ones.
std::filesystem::path node_cache_directory(const std::filesystem::path& parent, const std::string& source,
                                           const std::vector<ObjectInfo>& listing);

class NodeCache {
 public:
  // How far a download may fill the directory. The bound is the capacity and the largest object; only `any`
  // goes past it.
  enum class Room {
    // An object fetched ahead of its reader: within the capacity (so that a reader's object fits beside all
    // that is fetched ahead), and none while a reader of the node waits for room (waiting_for_room): fetching
    // ahead never takes the room a waiting reader needs.
    capacity,
    one_over,  // an object a reader waits for: within the capacity and the largest object
    any,       // a reader that waited too long for room the node's other ranks hold: whatever it takes
  };

  // A process's hold on one object: while any process holds it, no process deletes its file; or a reader's
  // wait for room (waiting_for_room). Released when destroyed, or by the kernel when the process dies.
  class Hold {
   public:
    Hold() = default;
    explicit Hold(int fd) : fd_(fd) {}
    ~Hold();
    Hold(Hold&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    bool held() const { return fd_ >= 0; }

   private:
    int fd_ = -1;
  };

  // `objects[i]` is kept at `directory / relative_paths[i]`; `capacity_bytes` bounds the objects' bytes in it
  // (their files, the downloads in flight, the leftovers of killed ones) for the node. Waits while another
  // process removes this directory as unused; removes the node cache directories beside it (those
  // node_cache_directory names) that no process uses. The client must outlive the cache.
  NodeCache(Client& client, std::string bucket, std::vector<ObjectInfo> objects,
            std::vector<std::filesystem::path> relative_paths, std::filesystem::path directory,
            std::uint64_t capacity_bytes);
  ~NodeCache();
  NodeCache(const NodeCache&) = delete;
  NodeCache& operator=(const NodeCache&) = delete;

  std::size_t size() const { return objects_.size(); }
  const ObjectInfo& object(std::size_t index) const { return objects_.at(index); }
  const std::filesystem::path& directory() const { return directory_; }
  std::filesystem::path path(std::size_t index) const { return directory_ / relative_paths_.at(index); }

  // Holds object `index` with its complete file in place: found there (a file of another size is not it), or
  // waited for while another process of the node downloads it, or downloaded here (to a temporary name,
  // verified, renamed) once `room` allows it, evicting files nobody holds, least recently used first. None
  // when that room cannot be made now: the node's ranks hold the rest, and a later try may find it. Throws
  // the download's tp::Error.
  std::optional<Hold> fetch(std::size_t index, Room room);

  // A reader of this process waits for room (its fetch found none): while any process of the node holds one,
  // fetches with Room::capacity that need room find none, and the ranks give up the objects they read last
  // (readers_waiting). Held until destroyed.
  Hold waiting_for_room();
  // Whether a reader of the node (this process's included) waits for room.
  bool readers_waiting() const;

  // Bytes of the objects in the directory: their files and those of downloads in flight or left by a killed
  // process.
  std::uint64_t bytes_on_disk() const;

 private:
  struct Usage;

  std::filesystem::path lock_path(std::size_t index, const char* kind) const;
  // Whether the file of object `index` is there with the listed size.
  bool complete(std::size_t index) const;
  // The temporary files of object `index` that downloads left in its directory.
  std::vector<std::filesystem::path> temporaries(std::size_t index) const;
  // The object a file of the directory is (`*temporary` set for a download's temporary file), if any.
  std::optional<std::size_t> object_of_file(const std::filesystem::path& file, bool* temporary) const;
  // Under the room lock: the bytes of the objects other than `index`, and the files that might be evicted.
  Usage usage(std::size_t index) const;
  // Under the fetch lock of `index` (`fetch_fd`): makes room for it and reserves it, or returns false.
  bool make_room(std::size_t index, Room room, int fetch_fd);

  Client& client_;
  std::string bucket_;
  std::vector<ObjectInfo> objects_;
  std::vector<std::filesystem::path> relative_paths_;
  std::filesystem::path directory_;
  std::filesystem::path locks_;
  std::uint64_t capacity_bytes_;
  std::uint64_t largest_ = 0;
  std::unordered_map<std::string, std::size_t> object_of_path_;  // relative path -> object
  std::unordered_map<std::string, std::size_t> object_of_lock_;  // lock file stem -> object
  std::vector<std::string> lock_stems_;                          // of each object
  int in_use_fd_ = -1;
};

}  // namespace tp::s3
