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

void write_text(const std::filesystem::path& path, const std::string& text);
// The file's content; empty when it cannot be read.
std::string read_text(const std::filesystem::path& path);

// The bytes in the regular files below `directory`. A cache's threads may evict files while this walks it:
// a file gone meanwhile counts as nothing (std::filesystem's throwing calls would fail the test).
std::uint64_t bytes_in(const std::filesystem::path& directory);

}  // namespace tp::testing
