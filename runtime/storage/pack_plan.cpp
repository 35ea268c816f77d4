#include "storage/pack_plan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <random>

#include "common/digest.h"
#include "data/tar.h"

namespace tp::storage {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
constexpr char kRecords[] = ".pack";  // beside the shards: one record per shard written, until index.json is
}  // namespace

std::vector<PlannedShard> plan_shards(const data::LabelledImages& images, const std::string& set_name,
                                      const data::FileStore& store, std::uint64_t shard_bytes,
                                      std::uint64_t seed, bool classification) {
  std::vector<std::size_t> order(images.files.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed * 1000003ULL + (set_name == "train" ? 1 : 2));
  std::shuffle(order.begin(), order.end(), generator);
  std::vector<PlannedShard> shards;
  std::uint64_t bytes = 0;
  std::uint64_t key = 0;
  for (const std::size_t i : order) {
    data::ShardSample sample{images.files[i], store.size(images.files[i]), images.targets[i]};
    const std::uint64_t size = data::shard_sample_bytes(sample, classification);
    const bool full = bytes + size + 2 * data::kTarBlock > shard_bytes;
    if (shards.empty() || (full && !shards.back().samples.empty())) {
      shards.push_back({fmt::format("{}-{:06d}.tar", set_name, shards.size()), key, {}});
      bytes = 0;
    }
    shards.back().samples.push_back(std::move(sample));
    bytes += size;
    ++key;
  }
  return shards;
}

std::string pack_plan_id(const std::vector<PlannedShard>& shards, std::uint64_t shard_bytes,
                         std::uint64_t seed,
                         const fs::path& source) {
  std::string text =
      fmt::format("{} {} {} {}\n", data::kShardIndexFormat, data::kShardIndexVersion, shard_bytes, seed);
  for (const PlannedShard& shard : shards) {
    text += shard.name + "\n";
    for (const data::ShardSample& sample : shard.samples) {
      text += fmt::format("{} {} {}\n", sample.file.lexically_relative(source).generic_string(), sample.size,
                          sample.target);
    }
  }
  return sha256_hex(text);
}

std::string shard_record_name(const std::string& shard) {
  return std::string(kRecords) + "/" + shard + ".json";
}

std::string shard_record(const std::string& plan_id, const data::ShardInfo& shard) {
  return json{{"plan", plan_id}, {"bytes", shard.bytes}, {"crc32c", shard.crc32c}}.dump() + "\n";
}

std::optional<data::ShardInfo> kept_shard(const PlannedShard& planned, const std::string& plan_id,
                                          const std::map<std::string, std::uint64_t>& existing,
                                          const PackDestination& destination) {
  const auto record_file = existing.find(shard_record_name(planned.name));
  const auto shard_file = existing.find(planned.name);
  if (record_file == existing.end() || shard_file == existing.end()) return std::nullopt;
  const json record = json::parse(destination.read_text(record_file->first), nullptr, false);
  if (record.is_discarded() || record.value("plan", "") != plan_id ||
      record.value("bytes", std::uint64_t{0}) != shard_file->second) {
    return std::nullopt;
  }
  data::ShardInfo info;
  info.name = planned.name;
  info.samples = planned.samples.size();
  info.bytes = shard_file->second;
  info.crc32c = record.value("crc32c", std::uint32_t{0});
  for (const data::ShardSample& sample : planned.samples) info.targets.push_back(sample.target);
  return info;
}

bool pack_leftover(const std::string& name, const std::set<std::string>& planned_names) {
  const bool record = name.rfind(std::string(kRecords) + "/", 0) == 0;
  const bool stale_shard = fs::path(name).extension() == ".tar" && !planned_names.count(name) &&
                           (name.rfind("train-", 0) == 0 || name.rfind("valid-", 0) == 0);
  // A killed pack's temporary files (temporary_sibling's names: .NAME.tmp-...).
  const bool temporary = name.front() == '.' && name.find(".tar.tmp-") != std::string::npos;
  return record || stale_shard || temporary;
}

std::string shard_records_folder() { return kRecords; }

}  // namespace tp::storage
