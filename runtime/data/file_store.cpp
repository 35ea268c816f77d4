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
    sort_paths(files);
    return files;
  }
  bool exists(const fs::path& file) const override {
    std::error_code error;
    return fs::is_regular_file(file, error);
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

void sort_paths(std::vector<fs::path>& paths) {
  std::vector<std::pair<std::string, std::size_t>> keys(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    keys[i] = {paths[i].native(), i};
    std::replace(keys[i].first.begin(), keys[i].first.end(), fs::path::preferred_separator, '\0');
  }
  std::sort(keys.begin(), keys.end());
  std::vector<fs::path> sorted;
  sorted.reserve(paths.size());
  for (const auto& key : keys) sorted.push_back(std::move(paths[key.second]));
  paths = std::move(sorted);
}

std::shared_ptr<const FileStore> local_files() {
  static const auto store = std::make_shared<const LocalFiles>();
  return store;
}

}  // namespace tp::data
