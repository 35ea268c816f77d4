#include "data/file_store.h"

#include <algorithm>

#include "common/error.h"
#include "common/files.h"

namespace tp::data {
namespace {

namespace fs = std::filesystem;

class LocalFiles final : public FileStore {
 public:
  std::vector<fs::path> list(const fs::path& dir) const override {
    std::error_code error;
    if (!fs::is_directory(dir, error)) fail(ExitCode::data, "{}: no such directory", dir.string());
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return files;
  }
  std::string read(const fs::path& file) const override { return read_file(file, ExitCode::data); }
  fs::path acquire(const fs::path& file) const override {
    size(file);  // fails naming a missing file
    return file;
  }
  std::uint64_t size(const fs::path& file) const override {
    std::error_code error;
    const std::uint64_t bytes = fs::file_size(file, error);
    if (error) fail(ExitCode::data, "{}: {}", file.string(), error.message());
    return bytes;
  }
};

}  // namespace

std::shared_ptr<const FileStore> local_files() {
  static const auto store = std::make_shared<const LocalFiles>();
  return store;
}

}  // namespace tp::data
