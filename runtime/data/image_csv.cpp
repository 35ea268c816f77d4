// image_csv: a CSV whose first column is an image path and whose data.target column is the label (listed by
// image_csv_listing.cpp).
#include "data/formats.h"
#include "data/image_formats.h"
#include "data/labelled_images.h"

namespace tp::data {

namespace fs = std::filesystem;

Datasets open_image_csv(const spec::DataSpec& spec, const fs::path& root, std::uint64_t seed,
                        const std::shared_ptr<const FileStore>& store) {
  return open_images(spec, seed, store, image_csv_split(spec, root, seed));
}

}  // namespace tp::data
