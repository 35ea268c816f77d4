// The samples of a packed shard set (docs/s3.md, "Packed shards") read as files <directory>/<shard>/<key>
// through a store that holds whole shards (local files, or S3 objects streamed into a bounded cache by
// storage): each read takes the whole shard and reads the member at its offset. Torch-free.
#pragma once

#include <filesystem>
#include <memory>

#include "data/file_store.h"
#include "data/shard_index.h"

namespace tp::data {

// A shard is checked against `index` the first time each copy of it is read (size, CRC32C, one image per
// sample key); a shard that fails its check fails every read of it as a BrokenStore.
std::shared_ptr<const FileStore> shard_store(std::shared_ptr<const FileStore> base,
                                             std::filesystem::path directory, const ShardIndex& index);

}  // namespace tp::data
