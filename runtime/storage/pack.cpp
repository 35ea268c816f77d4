#include "storage/pack.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "common/crc32c.h"
#include "common/digest.h"
#include "common/error.h"
#include "common/files.h"
#include "common/tasks.h"
#include "data/labelled_images.h"
#include "data/tar.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"
#include "storage/connection.h"

namespace tp::storage {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr char kRecords[] = ".pack";  // beside the shards: one record per shard written, until index.json is

struct PlannedSample {
  fs::path file;
  std::uint64_t size = 0;
  double target = 0;
};

struct PlannedShard {
  std::string name;
  std::uint64_t first_key = 0;  // the set's position of its first sample
  std::vector<PlannedSample> samples;
};

// Where the shards go: a local directory, or an S3 prefix. Names are relative to it.
class Destination {
 public:
  virtual ~Destination() = default;
  // The files there now with their sizes, by name (records under .pack/ included).
  virtual std::map<std::string, std::uint64_t> existing() const = 0;
  virtual std::string read_text(const std::string& name) const = 0;
  virtual void write_text(const std::string& name, const std::string& text) const = 0;
  // Where a shard is written before it is verified.
  virtual fs::path temporary_for(const std::string& name) const = 0;
  // The verified `temporary` becomes `name` (renamed, or uploaded and deleted).
  virtual void put(const fs::path& temporary, const std::string& name) const = 0;
  virtual void remove(const std::string& name) const = 0;
  virtual std::string describe(const std::string& name) const = 0;
};

class LocalDestination final : public Destination {
 public:
  explicit LocalDestination(fs::path directory) : directory_(std::move(directory)) {
    std::error_code error;
    fs::create_directories(directory_ / kRecords, error);
    if (error) fail(ExitCode::output, "{}: cannot be created: {}", directory_.string(), error.message());
  }
  std::map<std::string, std::uint64_t> existing() const override {
    std::map<std::string, std::uint64_t> files;
    for (const auto& entry : fs::recursive_directory_iterator(directory_)) {
      if (entry.is_regular_file()) files[entry.path().lexically_relative(directory_).generic_string()] = entry.file_size();
    }
    return files;
  }
  std::string read_text(const std::string& name) const override { return read_file(directory_ / name, ExitCode::output); }
  void write_text(const std::string& name, const std::string& text) const override {
    write_file_atomic(directory_ / name, text);
  }
  fs::path temporary_for(const std::string& name) const override { return temporary_sibling(directory_ / name); }
  void put(const fs::path& temporary, const std::string& name) const override { commit_file(temporary, directory_ / name); }
  void remove(const std::string& name) const override {
    std::error_code ignored;
    fs::remove(directory_ / name, ignored);
  }
  std::string describe(const std::string& name) const override { return (directory_ / name).string(); }

 private:
  fs::path directory_;
};

class S3Destination final : public Destination {
 public:
  S3Destination(const std::string& url, const s3::ConnectionOptions& connection, fs::path workdir)
      : url_(s3::parse_s3_url(url)),
        prefix_(s3::directory_prefix(url_.key)),
        connection_(s3::resolve_connection(connection)),
        workdir_(std::move(workdir)) {
    fs::create_directories(workdir_);
  }
  std::map<std::string, std::uint64_t> existing() const override {
    std::map<std::string, std::uint64_t> files;
    for (const auto& object : client().list(url_.bucket, prefix_).objects) files[object.key.substr(prefix_.size())] = object.size;
    return files;
  }
  std::string read_text(const std::string& name) const override {
    const fs::path local = workdir_ / ("read-" + fs::path(name).filename().string());
    s3::Client& c = client();
    const auto object = c.head(url_.bucket, prefix_ + name);
    if (!object) fail(ExitCode::output, "{}: not found", describe(name));
    c.download(url_.bucket, {{*object, local}});
    std::string text = read_file(local, ExitCode::output);
    fs::remove(local);
    return text;
  }
  void write_text(const std::string& name, const std::string& text) const override {
    const fs::path local = temporary_sibling(workdir_ / fs::path(name).filename());
    write_file_atomic(local, text);
    put(local, name);
  }
  fs::path temporary_for(const std::string& name) const override { return temporary_sibling(workdir_ / name); }
  void put(const fs::path& temporary, const std::string& name) const override {
    client().upload(url_.bucket, {{temporary, prefix_ + name}});
    std::error_code ignored;
    fs::remove(temporary, ignored);
  }
  void remove(const std::string& name) const override { client().remove(url_.bucket, prefix_ + name); }
  std::string describe(const std::string& name) const override { return "s3://" + url_.bucket + "/" + prefix_ + name; }

 private:
  // One client per thread: the workers upload at once.
  s3::Client& client() const {
    thread_local std::map<const S3Destination*, std::unique_ptr<s3::Client>> clients;
    auto& client = clients[this];
    if (!client) client = std::make_unique<s3::Client>(connection_);
    return *client;
  }

  s3::S3Url url_;
  std::string prefix_;
  s3::Connection connection_;
  fs::path workdir_;
};

std::string extension_of(const fs::path& file) {
  std::string extension = file.extension().string().substr(1);
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return std::tolower(c); });
  return extension;
}

// The label file of a sample: KEY.cls (the class index, as WebDataset's ImageNet shards have it) or KEY.json.
std::pair<std::string, std::string> label_member(const std::string& key, double target, bool classification) {
  if (classification) return {key + ".cls", std::to_string(static_cast<std::int64_t>(target))};
  return {key + ".json", json{{"target", target}}.dump()};
}

std::uint64_t sample_bytes(const PlannedSample& sample, bool classification) {
  const std::string label = label_member("", sample.target, classification).second;
  return data::tar_member_size(sample.size) + data::tar_member_size(label.size());
}

// The images of `images` in a seeded order (so that every shard holds every class), cut into shards of at most
// `shard_bytes` (a sample larger than that is a shard of its own).
std::vector<PlannedShard> plan_set(const data::LabelledImages& images, const std::string& set_name,
                                   const data::FileStore& store, std::uint64_t shard_bytes, std::uint64_t seed,
                                   bool classification) {
  std::vector<std::size_t> order(images.files.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed * 1000003ULL + (set_name == "train" ? 1 : 2));
  std::shuffle(order.begin(), order.end(), generator);
  std::vector<PlannedShard> shards;
  std::uint64_t bytes = 0;
  std::uint64_t key = 0;
  for (const std::size_t i : order) {
    PlannedSample sample{images.files[i], store.size(images.files[i]), images.targets[i]};
    const std::uint64_t size = sample_bytes(sample, classification);
    if (shards.empty() || (bytes + size + 2 * data::kTarBlock > shard_bytes && !shards.back().samples.empty())) {
      shards.push_back({fmt::format("{}-{:06d}.tar", set_name, shards.size()), key, {}});
      bytes = 0;
    }
    shards.back().samples.push_back(std::move(sample));
    bytes += size;
    ++key;
  }
  return shards;
}

// What identifies a plan: the format version, the settings and every sample with its size and target. Shards
// recorded under another plan are written again.
std::string plan_id(const std::vector<PlannedShard>& shards, const PackRequest& request, const fs::path& source) {
  std::string text = fmt::format("{} {} {} {}\n", data::kShardIndexFormat, data::kShardIndexVersion,
                                 request.shard_bytes, request.seed);
  for (const PlannedShard& shard : shards) {
    text += shard.name + "\n";
    for (const PlannedSample& sample : shard.samples) {
      text += fmt::format("{} {} {}\n", sample.file.lexically_relative(source).generic_string(), sample.size,
                          sample.target);
    }
  }
  return sha256_hex(text);
}

std::string record_name(const std::string& shard) { return std::string(kRecords) + "/" + shard + ".json"; }

// The shard an earlier pack of the same plan wrote, if its record and its file agree.
std::optional<data::ShardInfo> kept_shard(const PlannedShard& planned, const std::string& plan,
                                          const std::map<std::string, std::uint64_t>& existing,
                                          const Destination& destination) {
  const auto record_file = existing.find(record_name(planned.name));
  const auto shard_file = existing.find(planned.name);
  if (record_file == existing.end() || shard_file == existing.end()) return std::nullopt;
  const json record = json::parse(destination.read_text(record_name(planned.name)), nullptr, false);
  if (record.is_discarded() || record.value("plan", "") != plan ||
      record.value("bytes", std::uint64_t{0}) != shard_file->second) {
    return std::nullopt;
  }
  data::ShardInfo info;
  info.name = planned.name;
  info.samples = planned.samples.size();
  info.bytes = shard_file->second;
  info.crc32c = record.value("crc32c", std::uint32_t{0});
  for (const PlannedSample& sample : planned.samples) info.targets.push_back(sample.target);
  return info;
}

std::uint32_t file_crc32c(const fs::path& file, std::uint64_t& bytes) {
  std::ifstream in(file, std::ios::binary);
  std::string buffer(1 << 20, '\0');
  std::uint32_t crc = 0;
  bytes = 0;
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    crc = crc32c(std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount())), crc);
    bytes += static_cast<std::uint64_t>(in.gcount());
  }
  return crc;
}

// Writes one shard to a temporary name, checks what landed on disk against what was written, then puts it.
data::ShardInfo write_shard(const PlannedShard& planned, bool classification, const Destination& destination) {
  const fs::path temporary = destination.temporary_for(planned.name);
  data::ShardInfo info;
  info.name = planned.name;
  info.samples = planned.samples.size();
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail(ExitCode::output, "{}: cannot be written", temporary.string());
    std::string chunk;
    const auto emit = [&] {
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      info.crc32c = crc32c(chunk, info.crc32c);
      info.bytes += chunk.size();
      chunk.clear();
    };
    for (std::size_t i = 0; i < planned.samples.size(); ++i) {
      const PlannedSample& sample = planned.samples[i];
      const std::string key = data::shard_sample_key(planned.first_key + i);
      const std::string bytes = read_file(sample.file, ExitCode::data);
      if (bytes.size() != sample.size) {
        fail(ExitCode::data, "{}: {} bytes, {} when the pack was planned: the source changed while it was packed",
             sample.file.string(), bytes.size(), sample.size);
      }
      data::append_tar_member(chunk, key + "." + extension_of(sample.file), bytes);
      const auto [label_name, label] = label_member(key, sample.target, classification);
      data::append_tar_member(chunk, label_name, label);
      info.targets.push_back(sample.target);
      emit();
    }
    chunk = data::tar_end();
    emit();
    out.flush();
    if (!out) fail(write_failure_class(errno), "{}: write failed: {}", temporary.string(), std::strerror(errno));
  }
  std::uint64_t bytes = 0;
  const std::uint32_t crc = file_crc32c(temporary, bytes);
  if (bytes != info.bytes || crc != info.crc32c) {
    fail(ExitCode::storage, "{}: {} bytes with CRC32C {:08x} on disk, {} with {:08x} written", temporary.string(),
         bytes, crc, info.bytes, info.crc32c);
  }
  destination.put(temporary, planned.name);
  return info;
}

std::unique_ptr<Destination> open_destination(const PackRequest& request) {
  if (s3::is_s3_url(request.destination)) {
    return std::make_unique<S3Destination>(request.destination, connection_options(request.data),
                                           request.workdir / "upload");
  }
  return std::make_unique<LocalDestination>(request.destination);
}

// The source on local disk: itself, or an s3:// prefix staged into the work directory.
fs::path local_source(const PackRequest& request) {
  if (!s3::is_s3_url(request.data.source)) return fs::absolute(request.data.source).lexically_normal();
  s3::StageRequest stage;
  stage.source = request.data.source;
  stage.destination = request.workdir / "source";
  stage.connection = connection_options(request.data);
  const s3::StagedData staged = s3::stage(stage);
  spdlog::info("pack: staged {}: {} objects, {:.1f} MiB", request.data.source, staged.objects.size(),
               static_cast<double>(staged.bytes) / (1 << 20));
  return staged.root;
}

}  // namespace

PackResult pack(const PackRequest& request) {
  if (request.shard_bytes < (64u << 10)) fail(ExitCode::usage, "--shard-size-mb: at least 0.0625 (64 KiB)");
  const auto started = std::chrono::steady_clock::now();
  const bool classification = request.data.task == spec::Task::classification;
  if (request.data.task == spec::Task::multi_label) {
    fail(ExitCode::usage, "--task multi_label: packed shards hold one class or one number per image");
  }
  spec::DataSpec data = request.data;
  const fs::path source = local_source(request);
  data.source = source.string();
  const auto [train, valid] = data::labelled_images(data, fs::current_path(), request.seed, *data::local_files());

  PackResult result;
  data::ShardIndex& index = result.index;
  index.task = std::string(spec::name(request.data.task));
  index.classes = train.classes;
  index.source = request.data.source;
  index.seed = request.seed;
  std::vector<PlannedShard> plan =
      plan_set(train, "train", *data::local_files(), request.shard_bytes, request.seed, classification);
  const std::size_t train_shards = plan.size();
  for (PlannedShard& shard : plan_set(valid, "valid", *data::local_files(), request.shard_bytes, request.seed,
                                      classification)) {
    plan.push_back(std::move(shard));
  }
  const std::string plan_hash = plan_id(plan, request, source);

  const std::unique_ptr<Destination> destination = open_destination(request);
  const std::map<std::string, std::uint64_t> existing = destination->existing();
  // A reader must not take shards being rewritten for the index of another pack.
  if (existing.count(data::kShardIndexFile)) destination->remove(data::kShardIndexFile);

  std::vector<std::optional<data::ShardInfo>> shards(plan.size());
  std::vector<std::size_t> to_write;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    shards[i] = kept_shard(plan[i], plan_hash, existing, *destination);
    if (shards[i]) {
      ++result.kept;
    } else {
      to_write.push_back(i);
    }
  }
  if (result.kept > 0) spdlog::info("pack: {} shards of an interrupted pack of the same plan are kept", result.kept);

  std::mutex mutex;
  run_tasks(to_write.size(), request.workers, [&](std::size_t n) {
    const PlannedShard& planned = plan[to_write[n]];
    data::ShardInfo info = write_shard(planned, classification, *destination);
    destination->write_text(record_name(planned.name),
                            json{{"plan", plan_hash}, {"bytes", info.bytes}, {"crc32c", info.crc32c}}.dump() + "\n");
    std::lock_guard<std::mutex> lock(mutex);
    ++result.written;
    spdlog::info("pack: {}: {} samples, {:.1f} MiB ({} of {} written)", destination->describe(planned.name),
                 info.samples, static_cast<double>(info.bytes) / (1 << 20), result.written, to_write.size());
    shards[to_write[n]] = std::move(info);
  });

  for (std::size_t i = 0; i < plan.size(); ++i) {
    (i < train_shards ? index.train : index.valid).shards.push_back(std::move(*shards[i]));
  }
  destination->write_text(data::kShardIndexFile, data::shard_index_json(index));
  // The records and the shards of an earlier, larger pack have served their purpose.
  std::set<std::string> planned_names;
  for (const PlannedShard& shard : plan) planned_names.insert(shard.name);
  for (const auto& [name, size] : destination->existing()) {
    const bool record = name.rfind(std::string(kRecords) + "/", 0) == 0;
    const bool stale_shard = fs::path(name).extension() == ".tar" && !planned_names.count(name) &&
                             (name.rfind("train-", 0) == 0 || name.rfind("valid-", 0) == 0);
    // A killed pack's temporary files (temporary_sibling's names: .NAME.tmp-...).
    const bool leftover = name.front() == '.' && name.find(".tar.tmp-") != std::string::npos;
    if (record || stale_shard || leftover) destination->remove(name);
  }
  destination->remove(kRecords);  // the emptied folder, on a local disk
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  spdlog::info("pack: {}: {} training samples in {} shards, {} validation samples in {} shards, {:.1f} MiB in "
               "{:.1f} s ({} written, {} kept)", destination->describe(data::kShardIndexFile), index.train.samples(),
               index.train.shards.size(), index.valid.samples(), index.valid.shards.size(),
               static_cast<double>(index.train.bytes() + index.valid.bytes()) / (1 << 20), seconds, result.written,
               result.kept);
  return result;
}

}  // namespace tp::storage
