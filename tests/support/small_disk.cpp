#include "support/small_disk.h"

#include <sys/mount.h>

namespace tp::testing {

SmallDisk::SmallDisk(const std::filesystem::path& path, const std::string& size) : path_(path) {
  std::filesystem::create_directories(path);
  mounted_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
}

SmallDisk::~SmallDisk() {
  if (mounted_) ::umount(path_.c_str());
}

}  // namespace tp::testing
