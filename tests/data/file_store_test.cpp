// Listing local files: the order and the image-extension check every listing goes through.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "data/file_store.h"
#include "data/image.h"
#include "support/temp_dir.h"

namespace tp::data {
namespace {

namespace fs = std::filesystem;

// Names whose characters sort around the separator: '-', '.' and ' ' are below '/', letters and UTF-8 above.
const std::vector<std::string> kParts = {"a", "a-b", "a.b", "a b", "ab", "b", "é", "A", "a0", "-"};

TEST(FileStore, SortPathsGivesFilesystemPathsOrder) {
  std::mt19937 random(7);
  std::vector<fs::path> paths;
  for (int i = 0; i < 5000; ++i) {
    fs::path path = "/data";
    const int depth = 1 + static_cast<int>(random() % 4);
    for (int d = 0; d < depth; ++d) path /= kParts[random() % kParts.size()];
    paths.push_back(path);
  }
  std::vector<fs::path> expected = paths;
  std::sort(expected.begin(), expected.end());
  sort_paths(paths);
  EXPECT_EQ(paths, expected);
}

TEST(FileStore, ListsEveryFileInFilesystemPathsOrder) {
  testing::TempDir dir;
  std::vector<fs::path> expected;
  for (const std::string& folder : kParts) {
    for (const char* file : {"a-b.jpg", "a.png", "a", "b c.JPG"}) {
      fs::create_directories(dir.path() / folder);
      std::ofstream(dir.path() / folder / file) << folder;
      expected.push_back(dir.path() / folder / file);
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(local_files()->list(dir.path()), expected);
}

TEST(FileStore, ImagesAreKnownByTheirExtensionInAnyCase) {
  for (const char* image : {"a/b.jpg", "a/b.JPEG", "b.png", "a.b/c.Png", "./x.jpg"}) {
    EXPECT_TRUE(has_image_extension(image)) << image;
  }
  for (const char* other : {"a/b.txt", "a/.jpg", ".png", "a.jpg/b", "a/b", "b.png.txt", "a/b.jpg.", "a/b.jp"}) {
    EXPECT_FALSE(has_image_extension(other)) << other;
  }
}

}  // namespace
}  // namespace tp::data
