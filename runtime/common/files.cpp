#include "common/files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace tp {

ExitCode write_failure_class(int error_number) {
  return error_number == ENOSPC || error_number == EDQUOT || error_number == EIO ? ExitCode::storage
                                                                                 : ExitCode::output;
}

std::filesystem::path temporary_sibling(const std::filesystem::path& target) {
  static std::atomic<unsigned> counter{0};
  const std::string suffix = fmt::format(".tmp-{}-{}", ::getpid(), counter.fetch_add(1));
  // A file name may be 255 bytes: the target's own name is cut so that ".NAME.tmp-PID-N" fits too
  // (pid and counter keep it unique). Found with an S3 key whose last segment is 255 bytes long.
  std::string name = target.filename().string();
  name.resize(std::min(name.size(), 255 - 1 - suffix.size()));
  return target.parent_path() / ("." + name + suffix);
}

bool has_size(const std::filesystem::path& file, std::uint64_t size) {
  std::error_code error;
  return std::filesystem::file_size(file, error) == size && !error;
}

void commit_file(const std::filesystem::path& temporary, const std::filesystem::path& target) {
  const int fd = ::open(temporary.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error_number = errno;
    if (fd >= 0) ::close(fd);
    std::filesystem::remove(temporary);
    fail(write_failure_class(error_number), "cannot flush {}: {}", target.string(), std::strerror(error_number));
  }
  ::close(fd);
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    const int error_number = errno;
    std::filesystem::remove(temporary);
    fail(write_failure_class(error_number), "cannot rename {} to {}: {}", temporary.string(), target.string(),
         std::strerror(error_number));
  }
}

void write_file_atomic(const std::filesystem::path& target, std::string_view content) {
  const auto temporary = temporary_sibling(target);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      const int error_number = errno;
      out.close();
      std::filesystem::remove(temporary);
      fail(write_failure_class(error_number), "cannot write {}: {}", target.string(), std::strerror(error_number));
    }
  }
  commit_file(temporary, target);
}

std::string read_file(const std::filesystem::path& path, ExitCode code_if_unreadable) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(code_if_unreadable, "cannot read {}: {}", path.string(), std::strerror(errno));
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

MappedFile::MappedFile(const std::filesystem::path& path, ExitCode code_if_unreadable) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(code_if_unreadable, "{}: cannot be opened: {}", path.string(), std::strerror(errno));
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    const int error_number = errno;
    ::close(fd);
    fail(code_if_unreadable, "{}: cannot be read: {}", path.string(), std::strerror(error_number));
  }
  size_ = static_cast<std::size_t>(status.st_size);
  if (size_ > 0) {  // mmap refuses a length of 0; an empty file is an empty view
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (data_ == MAP_FAILED) {
      const int error_number = errno;
      ::close(fd);
      data_ = nullptr;
      fail(code_if_unreadable, "{}: cannot be mapped: {}", path.string(), std::strerror(error_number));
    }
    ::madvise(data_, size_, MADV_SEQUENTIAL);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace tp
