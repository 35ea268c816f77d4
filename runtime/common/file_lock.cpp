#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/log.h"

namespace tp {

// O_CLOEXEC: a program started while the lock is held (pip, git) must not keep it after this process.
FileLock::FileLock(const std::filesystem::path& path, const std::string& holder_does)
    : path_(path), fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
  if (fd_ < 0) fail(ExitCode::storage, "cannot open lock file {}: {}", path.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  spdlog::info("waiting for {}: another process is {}", path.string(), holder_does);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno != EINTR) fail(ExitCode::storage, "cannot lock {}: {}", path.string(), std::strerror(errno));
  }
}

FileLock::~FileLock() {
  ::close(fd_);
}

void FileLock::share() {
  while (::flock(fd_, LOCK_SH) != 0) {
    if (errno != EINTR) fail(ExitCode::storage, "cannot share the lock {}: {}", path_.string(), std::strerror(errno));
  }
}

}  // namespace tp
