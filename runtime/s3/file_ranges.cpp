#include "s3/file_ranges.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/files.h"

namespace tp::s3 {

namespace fs = std::filesystem;

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

int open_for_reading(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ExitCode::output, "cannot read {}: {}", path.string(), std::strerror(errno));
  return fd;
}

int open_for_writing(const fs::path& path) {
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(write_failure_class(errno), "cannot create {}: {}", path.string(), std::strerror(errno));
  return fd;
}

http::BodySource file_range_reader(int fd, std::uint64_t begin, std::uint64_t size) {
  return [fd, begin, size](char* buffer, std::size_t capacity,
                           std::uint64_t offset) -> std::optional<std::size_t> {
    if (offset >= size) return 0;
    ssize_t got = 0;
    do {
      got = ::pread(fd, buffer, std::min<std::uint64_t>(capacity, size - offset),
                    static_cast<off_t>(begin + offset));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) return std::nullopt;  // an error, or the file shrank since it was hashed
    return static_cast<std::size_t>(got);
  };
}

void hash_file_range(const fs::path& path, int fd, std::uint64_t begin, std::uint64_t size,
                     std::initializer_list<Digest*> digests) {
  std::vector<char> buffer(1 << 20);
  std::uint64_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, buffer.data(), std::min<std::uint64_t>(buffer.size(), size - done),
                                static_cast<off_t>(begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      fail(ExitCode::output, "cannot read {}: {}", path.string(),
           got < 0 ? std::strerror(errno) : "short file");
    for (Digest* digest : digests) digest->update(buffer.data(), static_cast<std::size_t>(got));
    done += static_cast<std::uint64_t>(got);
  }
}

GatheringWriter::GatheringWriter(int fd, std::uint64_t bytes_expected) : fd_(fd) {
  pending_.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(bytes_expected, kWriteChunk)));
}

bool GatheringWriter::write(const char* data, std::size_t size, std::uint64_t offset) {
  if (!pending_.empty() && offset != pending_offset_ + pending_.size() && !flush()) return false;
  if (pending_.empty()) pending_offset_ = offset;
  pending_.insert(pending_.end(), data, data + size);
  return pending_.size() < kWriteChunk || flush();
}

bool GatheringWriter::flush() {
  for (std::size_t done = 0; done < pending_.size();) {
    const ssize_t wrote = ::pwrite(fd_, pending_.data() + done, pending_.size() - done,
                                   static_cast<off_t>(pending_offset_ + done));
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) {
      error_ = errno;
      pending_.clear();
      return false;
    }
    done += static_cast<std::size_t>(wrote);
  }
  pending_.clear();
  return error_ == 0;
}

void GatheringWriter::flush_or_fail(const std::string& what, const fs::path& file) {
  if (!flush())
    fail(write_failure_class(error_), "{}: cannot write {}: {}", what, file.string(), std::strerror(error_));
}

}  // namespace tp::s3
