// A temporary directory removed at the end of a test.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace tp::testing {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A tmpfs of `size` (mount's size= option) mounted at `path` until the end of a test: a disk that fills up.
// Mounting needs root (CAP_SYS_ADMIN): a test checks mounted() and skips without it.
class SmallDisk {
 public:
  explicit SmallDisk(const std::filesystem::path& path, const std::string& size = "1m");
  ~SmallDisk();
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  bool mounted() const { return mounted_; }

 private:
  std::filesystem::path path_;
  bool mounted_;
};

void write_text(const std::filesystem::path& path, const std::string& text);
// The file's content; empty when it cannot be read.
std::string read_text(const std::filesystem::path& path);

// The bytes in the regular files below `directory`. A cache's threads may evict files while this walks it:
// a file gone meanwhile counts as nothing (std::filesystem's throwing calls would fail the test).
std::uint64_t bytes_in(const std::filesystem::path& directory);

}  // namespace tp::testing
