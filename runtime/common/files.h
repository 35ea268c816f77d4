// Files that appear only when complete: write to a temporary sibling, flush, then rename.
// A crash leaves at most a `*.tmp-*` file, never a truncated file under the final name.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>

#include "common/error.h"

namespace tp {

// A unique temporary path in the same directory as `target` (same filesystem, so rename is atomic).
std::filesystem::path temporary_sibling(const std::filesystem::path& target);
// fsyncs `temporary` and renames it over `target`.
void commit_file(const std::filesystem::path& temporary, const std::filesystem::path& target);
// Writes `content` to `target` atomically. Throws tp::Error (output or storage class) on failure.
void write_file_atomic(const std::filesystem::path& target, std::string_view content);
// Whether `file` is there with exactly `size` bytes (false when it cannot be examined): how a copy
// fetched earlier, and verified then, is recognised.
bool has_size(const std::filesystem::path& file, std::uint64_t size);
// How a failed write is classed by its errno: storage (retryable) for a full disk, a quota or an I/O error,
// output (permanent) otherwise, such as a missing permission.
ExitCode write_failure_class(int error_number);
// Reads a whole file; on failure throws tp::Error of class `code_if_unreadable`, naming the path.
std::string read_file(const std::filesystem::path& path, ExitCode code_if_unreadable);

// A file's bytes mapped read-only, for reading a large file once without copying it (a packed shard's check).
// Throws tp::Error of class `code_if_unreadable`, naming the path, when it cannot be opened or mapped.
class MappedFile {
 public:
  MappedFile(const std::filesystem::path& path, ExitCode code_if_unreadable);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace tp
