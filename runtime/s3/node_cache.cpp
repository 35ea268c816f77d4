#include "s3/node_cache.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>
#include <utility>

#include "common/digest.h"
#include "common/error.h"
#include "common/files.h"
#include "s3/paths.h"

namespace tp::s3 {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDirectoryPrefix = "shards-";

// An open lock file, closed (and so unlocked) when destroyed. O_CLOEXEC: a program started meanwhile must not
// keep the lock after this process.
class LockFile {
 public:
  explicit LockFile(const fs::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) fail(ExitCode::output, "cannot open lock file {}: {}", path.string(), std::strerror(errno));
  }
  ~LockFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

  // Waits for the lock (LOCK_SH or LOCK_EX).
  void lock(int operation, const fs::path& path) {
    while (::flock(fd_, operation) != 0) {
      if (errno != EINTR) fail(ExitCode::storage, "cannot lock {}: {}", path.string(), std::strerror(errno));
    }
  }
  // Takes the lock if no other open file holds a conflicting one.
  bool try_lock(int operation) {
    int result;
    while ((result = ::flock(fd_, operation | LOCK_NB)) != 0 && errno == EINTR) {
    }
    return result == 0;
  }
  int fd() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// The reservation a downloader wrote into its fetch lock: the bytes it may write (0 when none).
std::uint64_t read_reservation(int fd) {
  char text[32] = {};
  const ssize_t got = ::pread(fd, text, sizeof text - 1, 0);
  return got > 0 ? std::strtoull(text, nullptr, 10) : 0;
}

void write_reservation(int fd, std::uint64_t bytes, const fs::path& path) {
  const std::string text = bytes > 0 ? std::to_string(bytes) : "";
  if (::ftruncate(fd, 0) != 0 ||
      (!text.empty() && ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))) {
    fail(write_failure_class(errno), "cannot write {}: {}", path.string(), std::strerror(errno));
  }
}

// A download's temporary sibling of `file_name` (common/files.h's temporary_sibling: ".NAME.tmp-PID-N", the
// name cut to fit 255 bytes).
bool is_temporary_of(const std::string& temporary, const std::string& file_name) {
  if (!is_temporary_download(temporary)) return false;
  const std::string base = temporary.substr(1, temporary.rfind(".tmp-") - 1);
  return base == file_name || (temporary.size() == 255 && file_name.rfind(base, 0) == 0);
}

// The name of the object a temporary file may be a download of: its base, uncut.
std::string temporary_base(const std::string& temporary) {
  return temporary.substr(1, temporary.rfind(".tmp-") - 1);
}

std::uint64_t size_of(const fs::path& file) {
  struct stat status {};
  return ::stat(file.c_str(), &status) == 0 ? static_cast<std::uint64_t>(status.st_size) : 0;
}

// Removes the node cache directories beside `directory` that no process uses (their in-use lock is free).
void remove_unused_siblings(const fs::path& directory) {
  std::error_code error;
  for (fs::directory_iterator it(directory.parent_path(), error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kDirectoryPrefix, 0) != 0 || it->path() == directory) continue;
    std::error_code ignored;
    if (!it->is_directory(ignored) || it->path().extension() == ".locks") continue;
    LockFile in_use(it->path().string() + ".lock");
    if (!in_use.try_lock(LOCK_EX)) continue;
    spdlog::info("removing {}: the node's cache of a listing no process reads now", it->path().string());
    fs::remove_all(it->path(), ignored);
    fs::remove_all(it->path().string() + ".locks", ignored);
  }
}

}  // namespace

struct NodeCache::Usage {
  struct File {
    std::size_t index;
    std::uint64_t bytes;
    bool stale;  // not the listed size
    struct timespec used;
  };
  std::uint64_t bytes = 0;
  std::vector<File> files;  // under their final names
};

fs::path node_cache_directory(const fs::path& parent, const std::string& source,
                              const std::vector<ObjectInfo>& listing) {
  Hasher hasher(HashAlgorithm::sha256);
  hasher.update(source);
  for (const ObjectInfo& object : listing) {
    hasher.update(fmt::format("\n{}\n{}\n{}", object.key, object.size, object.etag));
  }
  return parent / (kDirectoryPrefix + hex(hasher.finish()).substr(0, 16));
}

NodeCache::Hold::~Hold() {
  if (fd_ >= 0) ::close(fd_);
}

NodeCache::Hold& NodeCache::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

NodeCache::NodeCache(Client& client, std::string bucket, std::vector<ObjectInfo> objects,
                     std::vector<fs::path> relative_paths, fs::path directory, std::uint64_t capacity_bytes)
    : client_(client),
      bucket_(std::move(bucket)),
      objects_(std::move(objects)),
      relative_paths_(std::move(relative_paths)),
      directory_(directory.lexically_normal()),
      capacity_bytes_(capacity_bytes) {
  if (!directory_.has_filename()) directory_ = directory_.parent_path();
  locks_ = directory_.string() + ".locks";
  for (std::size_t i = 0; i < objects_.size(); ++i) {
    largest_ = std::max(largest_, objects_[i].size);
    object_of_path_.emplace(relative_paths_[i].string(), i);
    lock_stems_.push_back(sha256_hex(relative_paths_[i].string()).substr(0, 32));
    object_of_lock_.emplace(lock_stems_.back(), i);
  }
  std::error_code error;
  fs::create_directories(directory_.parent_path(), error);
  if (error) fail(ExitCode::output, "cannot create {}: {}", directory_.parent_path().string(), error.message());
  LockFile in_use(directory_.string() + ".lock");
  in_use.lock(LOCK_SH, directory_.string() + ".lock");
  in_use_fd_ = in_use.release();
  for (const fs::path& folder : {directory_, locks_}) {
    fs::create_directories(folder, error);
    if (error) fail(ExitCode::output, "cannot create {}: {}", folder.string(), error.message());
  }
  remove_unused_siblings(directory_);
}

NodeCache::~NodeCache() {
  if (in_use_fd_ >= 0) ::close(in_use_fd_);
}

fs::path NodeCache::lock_path(std::size_t index, const char* kind) const {
  return locks_ / (lock_stems_[index] + kind);
}

bool NodeCache::complete(std::size_t index) const {
  struct stat status {};
  return ::stat(path(index).c_str(), &status) == 0 && S_ISREG(status.st_mode) &&
         static_cast<std::uint64_t>(status.st_size) == objects_[index].size;
}

std::vector<fs::path> NodeCache::temporaries(std::size_t index) const {
  std::vector<fs::path> found;
  const fs::path file = path(index);
  const std::string name = file.filename().string();
  std::error_code error;
  for (fs::directory_iterator it(file.parent_path(), error), end; !error && it != end; it.increment(error)) {
    if (is_temporary_of(it->path().filename().string(), name)) found.push_back(it->path());
  }
  return found;
}

std::optional<std::size_t> NodeCache::object_of_file(const fs::path& file, bool* temporary) const {
  const fs::path relative = file.lexically_relative(directory_);
  const std::string name = relative.filename().string();
  *temporary = is_temporary_download(name);
  const std::string key = *temporary ? (relative.parent_path() / temporary_base(name)).string() : relative.string();
  auto found = object_of_path_.find(key);
  if (found != object_of_path_.end()) return found->second;
  if (!*temporary || name.size() != 255) return std::nullopt;
  // A temporary file whose name was cut: the object of that directory whose name it starts.
  for (std::size_t i = 0; i < objects_.size(); ++i) {
    if (relative_paths_[i].parent_path() == relative.parent_path() &&
        is_temporary_of(name, relative_paths_[i].filename().string())) {
      return i;
    }
  }
  return std::nullopt;
}

std::optional<NodeCache::Hold> NodeCache::fetch(std::size_t index, Room room) {
  if (index >= objects_.size()) fail(ExitCode::internal, "object {} of {} requested", index, objects_.size());
  const fs::path file = path(index);
  // Held first: from here on no process deletes the complete file, whoever brings it.
  const fs::path hold_path = lock_path(index, ".hold");
  LockFile hold(hold_path);
  hold.lock(LOCK_SH, hold_path);
  // Each use makes it the most recently used: eviction goes by the files' times.
  const auto found = [&] {
    if (!complete(index)) return false;
    ::utimensat(AT_FDCWD, file.c_str(), nullptr, 0);
    return true;
  };
  if (found()) return Hold(hold.release());
  // One download per object per node: another process downloading it holds this lock until its file is in.
  const fs::path fetch_path = lock_path(index, ".fetch");
  LockFile fetching(fetch_path);
  fetching.lock(LOCK_EX, fetch_path);
  write_reservation(fetching.fd(), 0, fetch_path);  // what a killed downloader reserved is no longer used
  if (found()) return Hold(hold.release());
  // What an earlier download left goes first: a killed process's temporary files, a file of another size.
  std::error_code ignored;
  for (const fs::path& temporary : temporaries(index)) fs::remove(temporary, ignored);
  fs::remove(file, ignored);
  if (!make_room(index, room, fetching.fd())) return std::nullopt;
  struct Unreserve {
    int fd;
    ~Unreserve() { (void)::ftruncate(fd, 0); }
  } unreserve{fetching.fd()};
  fs::create_directories(file.parent_path(), ignored);
  client_.download(bucket_, {{objects_[index], file}});
  return Hold(hold.release());
}

NodeCache::Hold NodeCache::waiting_for_room() {
  const fs::path waiting_path = locks_ / "waiting.lock";
  LockFile waiting(waiting_path);
  waiting.lock(LOCK_SH, waiting_path);
  return Hold(waiting.release());
}

bool NodeCache::readers_waiting() const {
  LockFile waiting(locks_ / "waiting.lock");
  return !waiting.try_lock(LOCK_EX);
}

NodeCache::Usage NodeCache::usage(std::size_t index) const {
  Usage usage;
  // Downloads in flight: a fetch lock with a reservation, held. One that nobody holds was left by a process
  // that died: its reservation is cleared and its temporary files removed.
  std::set<std::size_t> reserved;
  std::error_code error;
  for (fs::directory_iterator it(locks_, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() != ".fetch") continue;
    const auto object = object_of_lock_.find(it->path().stem().string());
    if (object == object_of_lock_.end() || object->second == index) continue;
    std::error_code gone;
    if (it->file_size(gone) == 0 || gone) continue;
    LockFile fetching(it->path());
    if (fetching.try_lock(LOCK_EX)) {
      write_reservation(fetching.fd(), 0, it->path());
      std::error_code ignored;
      for (const fs::path& temporary : temporaries(object->second)) fs::remove(temporary, ignored);
    } else if (read_reservation(fetching.fd()) > 0) {
      reserved.insert(object->second);
    }
  }
  // The files: objects under their final names, and temporary files no reservation covers.
  std::set<std::size_t> on_disk;
  for (fs::recursive_directory_iterator it(directory_, error), end; !error && it != end; it.increment(error)) {
    struct stat status {};
    if (::lstat(it->path().c_str(), &status) != 0 || !S_ISREG(status.st_mode)) continue;
    bool temporary = false;
    const auto object = object_of_file(it->path(), &temporary);
    if (!object || *object == index) continue;
    const auto bytes = static_cast<std::uint64_t>(status.st_size);
    if (temporary) {
      if (!reserved.count(*object)) usage.bytes += bytes;
      continue;
    }
    usage.bytes += bytes;
    on_disk.insert(*object);
    usage.files.push_back({*object, bytes, bytes != objects_[*object].size, status.st_mtim});
  }
  for (const std::size_t object : reserved) {
    if (!on_disk.count(object)) usage.bytes += objects_[object].size;
  }
  return usage;
}

bool NodeCache::make_room(std::size_t index, Room room, int fetch_fd) {
  const std::uint64_t bytes = objects_[index].size;
  const std::uint64_t limit = room == Room::capacity   ? capacity_bytes_
                              : room == Room::one_over ? capacity_bytes_ + largest_
                                                       : UINT64_MAX;
  // One process at a time counts and evicts; it never waits for anything while it holds this lock.
  const fs::path room_path = locks_ / "room.lock";
  LockFile room_lock(room_path);
  room_lock.lock(LOCK_EX, room_path);
  // The room a waiting reader needs is not taken ahead of the readers, nor made for them (nothing evicted).
  if (room == Room::capacity && readers_waiting()) return false;
  Usage usage = this->usage(index);
  if (usage.bytes + bytes > limit) {
    // Files of another size first, then least recently used first.
    std::sort(usage.files.begin(), usage.files.end(), [](const Usage::File& a, const Usage::File& b) {
      if (a.stale != b.stale) return a.stale;
      return std::tie(a.used.tv_sec, a.used.tv_nsec) < std::tie(b.used.tv_sec, b.used.tv_nsec);
    });
    for (const Usage::File& victim : usage.files) {
      if (usage.bytes + bytes <= limit) break;
      LockFile hold(lock_path(victim.index, ".hold"));
      if (!hold.try_lock(LOCK_EX)) continue;  // a process holds it
      std::error_code error;
      if (fs::remove(path(victim.index), error)) usage.bytes -= victim.bytes;
    }
  }
  if (usage.bytes + bytes > limit) return false;
  if (room == Room::any && usage.bytes + bytes > capacity_bytes_ + largest_) {
    spdlog::warn("{}: {:.1f} MiB on disk with {}, past the node's cache of {:.1f} MiB: the node's ranks hold "
                 "more shards at once than it fits (raise data.stream_cache_mb)",
                 directory_.string(), static_cast<double>(usage.bytes + bytes) / (1 << 20),
                 relative_paths_[index].string(), static_cast<double>(capacity_bytes_) / (1 << 20));
  }
  write_reservation(fetch_fd, bytes, lock_path(index, ".fetch"));
  return true;
}

std::uint64_t NodeCache::bytes_on_disk() const {
  std::uint64_t total = 0;
  std::error_code error;
  for (fs::recursive_directory_iterator it(directory_, error), end; !error && it != end; it.increment(error)) {
    bool temporary = false;
    if (object_of_file(it->path(), &temporary)) total += size_of(it->path());
  }
  return total;
}

}  // namespace tp::s3
