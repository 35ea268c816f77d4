// Byte ranges of local files as transfers use them: read as a request body, hashed, and written as a
// download receives them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "http/transfer.h"
#include "s3/checksums.h"

namespace tp::s3 {

// A file descriptor closed on scope exit.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor();
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens `path` to read; throws tp::Error(output) naming it.
int open_for_reading(const std::filesystem::path& path);
// Creates (or truncates) `path` and its directories; throws tp::Error (output or storage class).
int open_for_writing(const std::filesystem::path& path);

// Bytes [begin, begin + size) of an open file as a request body.
http::BodySource file_range_reader(int fd, std::uint64_t begin, std::uint64_t size);

// Hashes [begin, begin + size) of a file with each digest, 1 MiB at a time. Throws tp::Error(output).
void hash_file_range(const std::filesystem::path& path, int fd, std::uint64_t begin, std::uint64_t size,
                     std::initializer_list<Digest*> digests);

// Writes what a download receives into its file, gathering contiguous pieces into one pwrite of up to
// kWriteChunk bytes instead of one per libcurl buffer (16-128 KiB). A file's writes hold its inode lock, and
// the ranges of a large object write one file at once: on two cores, 8 ranges spent a sixth of the client's
// CPU spinning on that lock with small writes (perf, docs/benchmarks.md).
class GatheringWriter {
 public:
  // bytes_expected: what the download will write at most (a small object gathers its size, no more).
  GatheringWriter(int fd, std::uint64_t bytes_expected);
  // Writes [data, data + size) at offset, now or together with the next contiguous pieces. false once a
  // write has failed (error() has its errno).
  bool write(const char* data, std::size_t size, std::uint64_t offset);
  bool flush();
  // flush(), failing (output or storage class) with "<what>: cannot write <file>: <errno's words>".
  void flush_or_fail(const std::string& what, const std::filesystem::path& file);

 private:
  static constexpr std::size_t kWriteChunk = 1 << 20;
  int fd_;
  std::vector<char> pending_;
  std::uint64_t pending_offset_ = 0;
  int error_ = 0;
};

}  // namespace tp::s3
