// Packed shards (data.format = "shards"; docs/s3.md, "Packed shards"): the samples of tar shards read as image
// files through a FileStore that holds whole shards (local files, or S3 objects streamed into a bounded cache
// by storage), each shard's CRC32C, size and members checked against the index when it lands on disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>

#include "data/file_store.h"
#include "data/labelled_images.h"
#include "data/shard_index.h"
#include "spec/spec.h"

namespace tp::data {

// The index.json of the shard set in `directory`, read through `store`.
ShardIndex read_shard_index(const std::filesystem::path& directory, const FileStore& store);

// The samples of `set` (the index's training or validation shards) as image files named
// <directory>/<shard>/<key>, each with its target, for a store that reads shards (shard_store.h).
LabelledImages shard_samples(const ShardSet& set, const ShardIndex& index, const std::filesystem::path& directory);

// Throws tp::Error(data) unless every shard of the index is in `directory` with the size the index gives it.
void check_shards_present(const ShardIndex& index, const std::filesystem::path& directory, const FileStore& store);

}  // namespace tp::data
