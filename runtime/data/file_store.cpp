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
};

}  // namespace

std::shared_ptr<const FileStore> local_files() {
  static const auto store = std::make_shared<const LocalFiles>();
  return store;
}

}  // namespace tp::data
