// Packed shards (data.format = "shards"; docs/s3.md, "Packed shards"): the samples of tar shards read as image
// files through a FileStore that holds whole shards (local files, or S3 objects streamed into a bounded cache
// by storage), each shard's CRC32C, size and members checked against the index when it lands on disk; and the
// image sources `trainpoint pack` packs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>

#include "data/file_store.h"
#include "data/image_formats.h"
#include "data/shard_index.h"
#include "spec/spec.h"

namespace tp::data {

// The training and validation images of an image_folder or image_csv source, split as training splits them
// (data.valid_source, fastai's train/ and valid/ folders, else a held-out data.valid share). Throws
// tp::Error(usage) for another format.
std::pair<LabelledImages, LabelledImages> labelled_images(const spec::DataSpec& spec, const std::filesystem::path& root,
                                                          std::uint64_t seed, const FileStore& store);

// The index.json of the shard set in `directory`, read through `store`.
ShardIndex read_shard_index(const std::filesystem::path& directory, const FileStore& store);

}  // namespace tp::data
