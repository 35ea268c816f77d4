// shards: the index.json and tar shards `trainpoint pack` writes, read as image files named
// <source>/<shard>/<key> through a store that holds whole shards and reads their members in place
// (shard_store.h).
#include "data/shards.h"

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "data/format_helpers.h"
#include "data/formats.h"
#include "data/shard_store.h"

namespace tp::data {

namespace fs = std::filesystem;

LabelledImages shard_samples(const ShardSet& set, const ShardIndex& index, const fs::path& directory) {
  LabelledImages images;
  images.root = directory;
  images.classes = index.classes;
  const bool classification = index.task == spec::name(spec::Task::classification);
  images.kind = classification ? TargetKind::class_index : TargetKind::number;
  std::uint64_t sample = 0;
  images.files.reserve(set.samples());
  for (const ShardInfo& shard : set.shards) {
    const std::string shard_folder = (directory / shard.name / "").string();
    for (std::uint64_t i = 0; i < shard.samples; ++i) {
      images.files.emplace_back(shard_folder + shard_sample_key(sample++));
    }
    images.targets.insert(images.targets.end(), shard.targets.begin(), shard.targets.end());
  }
  return images;
}

void check_shards_present(const ShardIndex& index, const fs::path& directory, const FileStore& store) {
  for (const ShardSet* set : {&index.train, &index.valid}) {
    for (const ShardInfo& shard : set->shards) {
      std::uint64_t bytes = 0;
      try {
        bytes = store.size(directory / shard.name);
      } catch (const Error& error) {
        fail(ExitCode::data, "{}: index.json lists {}, which is missing ({}): upload every shard `trainpoint pack` "
             "wrote", directory.string(), shard.name, error.what());
      }
      if (bytes != shard.bytes) {
        fail(ExitCode::data, "{}: {} bytes, but index.json says {}: the index does not match the shards (upload the "
             "index and shards of one `trainpoint pack` together)", (directory / shard.name).string(), bytes,
             shard.bytes);
      }
    }
  }
}

ShardIndex read_shard_index(const fs::path& directory, const FileStore& store) {
  const fs::path file = directory / kShardIndexFile;
  return parse_shard_index(store.read(file), file.string());
}

Datasets open_shards(const spec::DataSpec& spec, const fs::path& root, std::uint64_t seed,
                     const std::shared_ptr<const FileStore>& store) {
  const fs::path directory = resolve(root, spec.source);
  if (!spec.valid_source.empty()) {
    fail(ExitCode::spec, "data.valid_source: with data.format = \"shards\" the validation set is the index's (pack "
         "with --valid or --valid-source)");
  }
  const ShardIndex index = read_shard_index(directory, *store);
  if (index.task != spec::name(spec.task)) {
    fail(ExitCode::spec, "data.task = \"{}\", but {} was packed for {}", spec::name(spec.task),
         (directory / kShardIndexFile).string(), index.task);
  }
  check_shards_present(index, directory, *store);
  spdlog::info("shards in {}: {} training samples in {} shards ({:.1f} MiB), {} validation samples in {} shards",
               directory.string(), index.train.samples(), index.train.shards.size(),
               static_cast<double>(index.train.bytes()) / (1 << 20), index.valid.samples(), index.valid.shards.size());
  Datasets datasets = open_images(spec, seed, shard_store(store, directory, index),
                                  {shard_samples(index.train, index, directory), shard_samples(index.valid, index, directory)});
  for (const ShardInfo& shard : index.train.shards) datasets.train_shard_sizes.push_back(shard.samples);
  return datasets;
}

}  // namespace tp::data
