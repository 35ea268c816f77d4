// A disk that fills up: a tmpfs of a given size mounted at a path until the end of a test.
#pragma once

#include <filesystem>
#include <string>

namespace tp::testing {

// Mounting needs root (CAP_SYS_ADMIN): a test checks mounted() and skips without it.
class SmallDisk {
 public:
  // size: mount's size= option ("1m", "16m").
  explicit SmallDisk(const std::filesystem::path& path, const std::string& size = "1m");
  ~SmallDisk();
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  bool mounted() const { return mounted_; }

 private:
  std::filesystem::path path_;
  bool mounted_;
};

}  // namespace tp::testing
