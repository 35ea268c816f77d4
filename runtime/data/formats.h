// The data formats: one opener per spec::DataFormat, each in its own file (image_folder.cpp, image_csv.cpp,
// table_csv.cpp, shards.cpp). The registry in open.cpp maps a format to its opener, and says how to add a format.
// Internal to tp_data; data::open is the way in.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "data/dataset.h"
#include "data/image_formats.h"
#include "data/file_store.h"
#include "spec/spec.h"

namespace tp::data {

// Opens the training and validation data of `spec` as data::open describes, before the checks open makes of
// every format.
using FormatOpener = Datasets (*)(const spec::DataSpec& spec, const std::filesystem::path& root,
                                  std::uint64_t seed, const std::shared_ptr<const FileStore>& store);

Datasets open_image_folder(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
                           const std::shared_ptr<const FileStore>& store);
Datasets open_image_csv(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
                        const std::shared_ptr<const FileStore>& store);
Datasets open_shards(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
                      const std::shared_ptr<const FileStore>& store);
Datasets open_table_csv(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
                        const std::shared_ptr<const FileStore>& store);

}  // namespace tp::data
