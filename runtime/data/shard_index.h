// The index of a packed shard set (`trainpoint pack`, data.format = "shards"; docs/s3.md, "Packed shards"):
// index.json beside the tar shards, naming the task and classes, and for the training and the validation set
// each shard's name, sample count, size, CRC32C and the samples' targets in shard order. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tp::data {

inline constexpr const char* kShardIndexFile = "index.json";
inline constexpr const char* kShardIndexFormat = "trainpoint-shards";
inline constexpr std::uint64_t kShardIndexVersion = 1;

struct ShardInfo {
  std::string name;  // train-000000.tar: a file beside index.json
  std::uint64_t samples = 0;
  std::uint64_t bytes = 0;
  std::uint32_t crc32c = 0;     // of the whole file
  std::vector<double> targets;  // one per sample, in shard order: a class index, or a regression target
};

struct ShardSet {
  std::vector<ShardInfo> shards;
  std::uint64_t samples() const;
  std::uint64_t bytes() const;
};

struct ShardIndex {
  std::string task;                  // "classification" or "regression" (spec::Task's names)
  std::vector<std::string> classes;  // classification
  std::string source;                // what was packed, for people reading the index
  std::uint64_t seed = 0;
  ShardSet train;
  ShardSet valid;  // may have no shards
};

// A sample's key, the name its files share in a shard ("s000000042" for .jpg and .cls): its position in its set.
// The one place the key's format is written and read.
std::string shard_sample_key(std::uint64_t sample);
// The position a key names: parse_shard_sample_key("s000000042") is 42; none for a name that is not a key.
std::optional<std::uint64_t> parse_shard_sample_key(std::string_view key);

// Parses index.json. Throws tp::Error (data) naming `where` and what is wrong (not JSON, another format or
// version, a missing field, targets that do not match the sample count, a class index out of range).
ShardIndex parse_shard_index(std::string_view json, const std::string& where);
std::string shard_index_json(const ShardIndex& index);

}  // namespace tp::data
