// An flock(2) lock on a file: how the node-local caches (git mirrors, Python environments) let one
// process build an entry while the node's other ranks and pods wait, and a crashed holder lets go.
#pragma once

#include <filesystem>
#include <string>

namespace tp {

class FileLock {
 public:
  // Waits for an exclusive lock on `path` (created if needed), logging once that it waits and for what:
  // `holder_does` says what the process holding it is doing, such as "updating this git cache entry".
  FileLock(const std::filesystem::path& path, const std::string& holder_does);
  // The kernel also drops the lock when the process dies.
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  // Converts to a shared lock: readers may proceed together, a writer waits for all of them.
  void share();

 private:
  std::filesystem::path path_;
  int fd_;
};

}  // namespace tp
