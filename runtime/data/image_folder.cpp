// image_folder: one subdirectory per class holding PNG or JPEG files, or fastai's train/ and valid/ folders
// (listed by image_folder_listing.cpp).
#include "data/formats.h"
#include "data/image_formats.h"
#include "data/labelled_images.h"

namespace tp::data {

namespace fs = std::filesystem;

Datasets open_image_folder(const spec::DataSpec& spec, const fs::path& root, std::uint64_t seed,
                           const std::shared_ptr<const FileStore>& store) {
  return open_images(spec, seed, store, image_folder_split(spec, root, seed, *store));
}

}  // namespace tp::data
