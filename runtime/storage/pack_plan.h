// What `trainpoint pack` writes and what it can keep: the samples of each shard in a seeded order, the
// plan's identity, and the records beside the shards (.pack/) that let a pack run again after an
// interruption keep the shards already written for the same plan. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "data/file_store.h"
#include "data/labelled_images.h"
#include "data/shard_index.h"
#include "data/shard_writer.h"
#include "storage/pack_destination.h"

namespace tp::storage {

struct PlannedShard {
  std::string name;             // train-000000.tar
  std::uint64_t first_key = 0;  // the set's position of its first sample
  std::vector<data::ShardSample> samples;
};

struct PackPlan {
  std::vector<PlannedShard> shards;  // the training set's, then the validation set's
  std::size_t train_shards = 0;
  std::string id;  // what identifies the plan (pack_plan_id)
};

// The images of `images` in a seeded order (so that every shard holds every class), cut into shards of at
// most `shard_bytes` (a sample larger than that is a shard of its own). `set_name`: train or valid.
std::vector<PlannedShard> plan_shards(const data::LabelledImages& images, const std::string& set_name,
                                      const data::FileStore& store, std::uint64_t shard_bytes,
                                      std::uint64_t seed, bool classification);

// What identifies a plan: the format version, the settings and every sample (named relative to `source`) with
// its size and target. Shards recorded under another plan are written again.
std::string pack_plan_id(const std::vector<PlannedShard>& shards, std::uint64_t shard_bytes,
                         std::uint64_t seed,
                         const std::filesystem::path& source);

// The record of a shard written under plan `plan_id`, and its name beside the shards.
std::string shard_record_name(const std::string& shard);
std::string shard_record(const std::string& plan_id, const data::ShardInfo& shard);

// The shard an earlier pack of the same plan wrote, if its record and its file in `existing` agree.
std::optional<data::ShardInfo> kept_shard(const PlannedShard& planned, const std::string& plan_id,
                                          const std::map<std::string, std::uint64_t>& existing,
                                          const PackDestination& destination);

// Whether `name` at the destination is left from earlier packs once the index is written: a record, a shard
// no longer planned (of an earlier, larger pack), or a killed pack's temporary file.
bool pack_leftover(const std::string& name, const std::set<std::string>& planned_names);
// The folder of the records, removed last.
std::string shard_records_folder();

}  // namespace tp::storage
