#include "storage/data_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/error.h"
#include "common/files.h"
#include "data/image.h"
#include "s3/node_cache.h"
#include "s3/paths.h"
#include "s3/stage.h"
#include "storage/connection.h"
#include "storage/streamed_files.h"

namespace tp::storage {
namespace {

namespace fs = std::filesystem;

// A directory holding exactly the staged objects (hard links into the cache), so that objects
// cached by earlier runs or for other ranks of the node are not read as data.
fs::path make_view(const s3::StagedData& staged, const fs::path& view) {
  fs::remove_all(view);
  for (const auto& object : staged.objects) {
    const fs::path target = view / object.relative_path;
    fs::create_directories(target.parent_path());
    std::error_code error;
    fs::create_hard_link(staged.root / object.relative_path, target, error);
    if (error) fs::copy_file(staged.root / object.relative_path, target);
  }
  return view;
}

// Stages `source` into the node's cache (shared by its ranks, one transfer) and returns the local view.
fs::path stage(const std::string& source, const spec::DataSpec& spec, const Placement& placement, bool shard,
               const char* view_name) {
  s3::StageRequest request;
  request.source = source;
  request.destination = placement.workdir / "cache" / "s3";
  request.rank = placement.rank;
  request.world_size = placement.topology.world_size();
  request.local_rank = placement.topology.local_rank.value_or(0);
  request.local_world_size = placement.topology.nproc_per_node;
  request.sharding = shard ? s3::Sharding::shard : s3::Sharding::all;
  request.connection = connection_options(spec);
  const s3::StagedData staged = s3::stage(request);
  spdlog::info("staged {}: {} objects, {:.1f} MiB ({} downloaded, {} cached)", source, staged.objects.size(),
               static_cast<double>(staged.bytes) / (1 << 20), staged.downloaded, staged.cached);
  return make_view(staged, placement.workdir / "data" / fmt::format("rank-{}", placement.rank) / view_name);
}

// Lists `source` and returns a store that fetches its images (or, for packed shards, its tar shards) as the
// loader asks for them. Other objects (the CSV that labels the images, a shard set's index.json) are
// downloaded before training starts.
std::shared_ptr<StreamedFiles> stream(const std::string& source, const spec::DataSpec& spec,
                                      const Placement& placement, fs::path& directory) {
  const s3::S3Url url = s3::parse_s3_url(source);
  const bool shards = spec.format == spec::DataFormat::shards;
  s3::TransferSettings transfer;
  // A shard is read only once it is whole: it comes in ranges at once, the next shard after it.
  if (shards) transfer.parallel_download_threshold = transfer.part_size;
  auto client = std::make_unique<s3::Client>(s3::resolve_connection(connection_options(spec)), transfer);
  const s3::SourceListing listing = s3::list_source(*client, source);
  const auto streamed = [&](const fs::path& file) {
    return shards ? file.extension() == ".tar" : data::has_image_extension(file);
  };

  // Shards go to the node's cache, which the node's ranks share (one download per shard per node); images to
  // the rank's own directory: each image is read by one rank per epoch.
  const fs::path stream_root = placement.workdir / "cache" / "stream";
  const fs::path rank_directory = stream_root / fmt::format("rank-{}", placement.rank);
  std::error_code error;
  fs::remove_all(rank_directory, error);  // what this rank streamed last time (shards too, before node caches)
  directory = shards ? s3::node_cache_directory(stream_root, source, listing.objects).lexically_normal() : rank_directory;

  std::vector<s3::ObjectInfo> objects;
  std::vector<fs::path> object_paths;
  std::vector<s3::DownloadItem> others;
  std::vector<fs::path> other_files;
  std::uint64_t largest = 0;
  for (const auto& object : listing.objects) {
    const fs::path relative = s3::local_path_for_key(object.key, listing.prefix);
    if (streamed(relative)) {
      objects.push_back(object);
      object_paths.push_back(relative);
      largest = std::max(largest, object.size);
    } else {
      others.push_back({object, directory / relative});
      other_files.push_back(directory / relative);
    }
  }
  const std::uint64_t capacity = static_cast<std::uint64_t>(spec.stream_cache_mb) << 20;
  if (shards && largest > capacity) {
    fail(ExitCode::spec, "data.stream_cache_mb = {}: the largest shard of {} is {:.0f} MiB and must fit (a shuffle "
         "buffer reads from a few shards at once: give it several)", spec.stream_cache_mb, source,
         static_cast<double>(largest) / (1 << 20));
  }
  s3::PrefetchCache::Options options;
  options.capacity_bytes = capacity;
  std::shared_ptr<s3::NodeCache> node;
  if (shards) {
    options.lookahead = 4;  // whole shards: a few ahead of the reader keep it busy
    options.objects_per_fetch = 1;
    // Before anything is written there: the directory is in use from here on.
    node = std::make_shared<s3::NodeCache>(*client, url.bucket, objects, object_paths, directory, capacity);
    // The index: fetched by the node's first rank, found by the others (a listing's directory holds its own).
    others.erase(std::remove_if(others.begin(), others.end(),
                                [](const s3::DownloadItem& item) { return has_size(item.target, item.object.size); }),
                 others.end());
  } else {
    fs::create_directories(directory, error);
    if (error) fail(ExitCode::output, "cannot create {}: {}", directory.string(), error.message());
  }
  if (!others.empty()) client->download(url.bucket, others);
  spdlog::info("streaming {}: {} {}, {:.1f} MiB in all, through {} cache of {} MiB in {}", source, objects.size(),
               shards ? "shards" : "images", static_cast<double>(listing.bytes) / (1 << 20),
               shards ? "the node's" : "this rank's", spec.stream_cache_mb, directory.string());
  if (node) return std::make_shared<StreamedFiles>(std::move(client), std::move(node), std::move(other_files), options);
  return std::make_shared<StreamedFiles>(std::move(client), url.bucket, std::move(objects), object_paths, directory,
                                         std::move(other_files), options);
}

}  // namespace

data::Datasets open_data(const spec::DataSpec& spec, const fs::path& root, const Placement& placement,
                         std::uint64_t seed) {
  spec::DataSpec local = spec;
  const bool multi_rank = placement.topology.world_size() > 1;
  std::shared_ptr<const data::FileStore> store = data::local_files();
  bool rank_share = false;
  if (s3::is_s3_url(spec.source)) {
    // Packed shards always stream: each is read whole, a few at a time.
    if (spec.format == spec::DataFormat::shards ||
        (spec.staging == spec::Staging::stream && spec::reads_images(spec.format))) {
      fs::path directory;
      store = stream(spec.source, spec, placement, directory);
      local.source = directory.string();
    } else {
      if (spec.staging == spec::Staging::stream) spdlog::info("data.staging = \"stream\": a table_csv source is staged whole");
      rank_share = spec.staging == spec::Staging::shard && multi_rank;
      local.source = stage(spec.source, spec, placement, rank_share, "train").string();
    }
  }
  if (s3::is_s3_url(spec.valid_source)) local.valid_source = stage(spec.valid_source, spec, placement, false, "valid").string();
  data::Datasets data = data::open(local, root, seed, store);
  data.rank_share = rank_share;
  data.ranks_per_node = placement.topology.nproc_per_node;
  const std::size_t world_size = static_cast<std::size_t>(placement.topology.world_size());
  if (spec.format == spec::DataFormat::shards && data.train->size() < world_size) {
    fail(ExitCode::data, "{}: {} training samples in {} shards cannot give each of the {} ranks one: pack more "
         "data, or run fewer ranks", spec.source, data.train->size(), data.train_shard_sizes.size(), world_size);
  }
  return data;
}

fs::path local_data_for_command(const spec::DataSpec& spec, const fs::path& root, const Placement& placement) {
  if (s3::is_s3_url(spec.source)) return stage(spec.source, spec, placement, false, "source");
  if (spec.source.find("://") != std::string::npos) {
    fail(ExitCode::spec, "data.source '{}': only local paths and s3:// sources are supported", spec.source);
  }
  const fs::path local = fs::absolute(root / spec.source).lexically_normal();
  if (!fs::exists(local)) {
    fail(ExitCode::data, "data.source: {} does not exist in the repository or on local disk", local.string());
  }
  return local;
}

}  // namespace tp::storage
