// Writing one packed shard (docs/s3.md, "Packed shards"): each sample's image and label as tar members named
// by its key (KEY.jpg and KEY.cls, the WebDataset layout), checked on disk after it is written. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/shard_index.h"

namespace tp::data {

// A sample to pack: its image file, that file's size when the pack was planned, and its target.
struct ShardSample {
  std::filesystem::path file;
  std::uint64_t size = 0;
  double target = 0;
};

// The bytes `sample` takes in a shard: its image's and its label's tar members. `classification`: the label
// is the class index (KEY.cls), else the number in KEY.json.
std::uint64_t shard_sample_bytes(const ShardSample& sample, bool classification);

// Writes `samples`, keyed from `first_key`, as a tar shard to `file`, then checks what landed on disk against
// what was written (size and CRC32C). Returns the shard's entry of the index, named `name`. Throws tp::Error:
// data (a sample's file changed size since it was planned), output or storage (writing).
ShardInfo write_shard(const std::filesystem::path& file, const std::string& name, std::uint64_t first_key,
                      const std::vector<ShardSample>& samples, bool classification);

}  // namespace tp::data
