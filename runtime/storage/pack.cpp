#include "storage/pack.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <mutex>
#include <set>

#include "common/error.h"
#include "common/tasks.h"
#include "data/labelled_images.h"
#include "data/shard_writer.h"
#include "s3/paths.h"
#include "s3/stage.h"
#include "storage/connection.h"
#include "storage/pack_destination.h"
#include "storage/pack_plan.h"

namespace tp::storage {

namespace fs = std::filesystem;

namespace {

double mib(std::uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The source on local disk: itself, or an s3:// prefix staged into the work directory.
fs::path local_source(const PackRequest& request) {
  if (!s3::is_s3_url(request.data.source)) return fs::absolute(request.data.source).lexically_normal();
  s3::StageRequest stage;
  stage.source = request.data.source;
  stage.destination = request.workdir / "source";
  stage.connection = connection_options(request.data);
  const s3::StagedData staged = s3::stage(stage);
  spdlog::info("pack: staged {}: {} objects, {:.1f} MiB", request.data.source, staged.objects.size(),
               mib(staged.bytes));
  return staged.root;
}

// The shards of the training set, then the validation set's, split as training splits the source; the index
// begun with what it says of the source.
PackPlan plan_pack(const PackRequest& request, const fs::path& source, data::ShardIndex& index) {
  spec::DataSpec data = request.data;
  data.source = source.string();
  const data::FileStore& files = *data::local_files();
  const auto [train, valid] = data::labelled_images(data, fs::current_path(), request.seed, files);
  index.task = std::string(spec::name(request.data.task));
  index.classes = train.classes;
  index.source = request.data.source;
  index.seed = request.seed;
  const bool classification = request.data.task == spec::Task::classification;
  PackPlan plan;
  plan.shards = plan_shards(train, "train", files, request.shard_bytes, request.seed, classification);
  plan.train_shards = plan.shards.size();
  std::vector<PlannedShard> valid_shards =
      plan_shards(valid, "valid", files, request.shard_bytes, request.seed, classification);
  std::move(valid_shards.begin(), valid_shards.end(), std::back_inserter(plan.shards));
  plan.id = pack_plan_id(plan.shards, request.shard_bytes, request.seed, source);
  return plan;
}

// Every shard of the plan: the ones an interrupted pack of the same plan wrote, and the others written now,
// `workers` at once.
std::vector<data::ShardInfo> write_shards(const PackPlan& plan, const PackDestination& destination,
                                          bool classification, int workers, PackResult& result) {
  const std::map<std::string, std::uint64_t> existing = destination.existing();
  // A reader must not take shards being rewritten for the index of another pack.
  if (existing.count(data::kShardIndexFile)) destination.remove(data::kShardIndexFile);
  std::vector<std::optional<data::ShardInfo>> shards(plan.shards.size());
  std::vector<std::size_t> to_write;
  for (std::size_t i = 0; i < plan.shards.size(); ++i) {
    shards[i] = kept_shard(plan.shards[i], plan.id, existing, destination);
    if (!shards[i]) to_write.push_back(i);
  }
  result.kept = plan.shards.size() - to_write.size();
  if (result.kept > 0) spdlog::info("pack: {} shards of an interrupted pack of the same plan are kept", result.kept);
  std::mutex mutex;
  run_tasks(to_write.size(), workers, [&](std::size_t n) {
    const PlannedShard& planned = plan.shards[to_write[n]];
    const fs::path temporary = destination.temporary_for(planned.name);
    data::ShardInfo info =
        data::write_shard(temporary, planned.name, planned.first_key, planned.samples, classification);
    destination.put(temporary, planned.name);
    destination.write_text(shard_record_name(planned.name), shard_record(plan.id, info));
    std::lock_guard<std::mutex> lock(mutex);
    ++result.written;
    spdlog::info("pack: {}: {} samples, {:.1f} MiB ({} of {} written)", destination.describe(planned.name),
                 info.samples, mib(info.bytes), result.written, to_write.size());
    shards[to_write[n]] = std::move(info);
  });
  std::vector<data::ShardInfo> written;
  for (auto& shard : shards) written.push_back(std::move(*shard));
  return written;
}

// The records and the shards of an earlier, larger pack have served their purpose once the index is written.
void remove_leftovers(const PackPlan& plan, const PackDestination& destination) {
  std::set<std::string> planned_names;
  for (const PlannedShard& shard : plan.shards) planned_names.insert(shard.name);
  for (const auto& [name, size] : destination.existing()) {
    if (pack_leftover(name, planned_names)) destination.remove(name);
  }
  destination.remove(shard_records_folder());  // the emptied folder, on a local disk
}

}  // namespace

PackResult pack(const PackRequest& request) {
  if (request.shard_bytes < (64u << 10)) fail(ExitCode::usage, "--shard-size-mb: at least 0.0625 (64 KiB)");
  const auto started = std::chrono::steady_clock::now();
  if (request.data.task == spec::Task::multi_label) {
    fail(ExitCode::usage, "--task multi_label: packed shards hold one class or one number per image");
  }
  PackResult result;
  data::ShardIndex& index = result.index;
  const PackPlan plan = plan_pack(request, local_source(request), index);
  const std::unique_ptr<PackDestination> destination = open_pack_destination(
      request.destination, connection_options(request.data), request.workdir / "upload");
  const bool classification = request.data.task == spec::Task::classification;
  std::vector<data::ShardInfo> shards =
      write_shards(plan, *destination, classification, request.workers, result);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    (i < plan.train_shards ? index.train : index.valid).shards.push_back(std::move(shards[i]));
  }
  destination->write_text(data::kShardIndexFile, data::shard_index_json(index));
  remove_leftovers(plan, *destination);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("pack: {}: {} training samples in {} shards, {} validation samples in {} shards, {:.1f} MiB in "
               "{:.1f} s ({} written, {} kept)", destination->describe(data::kShardIndexFile), index.train.samples(),
               index.train.shards.size(), index.valid.samples(), index.valid.shards.size(),
               mib(index.train.bytes() + index.valid.bytes()), seconds, result.written, result.kept);
  return result;
}

}  // namespace tp::storage
