// The openers of the data formats. Internal to tp_data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "data/dataset.h"
#include "data/file_store.h"
#include "spec/spec.h"

namespace tp::data {

// image_folder and image_csv.
Datasets open_images(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
                     const std::shared_ptr<const FileStore>& store);

// table_csv.
Datasets open_table(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed);

}  // namespace tp::data
