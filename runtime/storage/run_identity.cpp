#include "storage/run_identity.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "common/digest.h"
#include "common/error.h"
#include "common/files.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"
#include "storage/connection.h"

namespace tp::storage {
namespace {

namespace fs = std::filesystem;

// One listed file of a data source: path below the source, size, and the ETag where S3 gives one.
struct ListedFile {
  std::string name;
  std::uint64_t size = 0;
  std::string etag;
};

std::vector<ListedFile> local_files(const fs::path& source) {
  std::vector<ListedFile> files;
  std::error_code error;
  if (fs::is_regular_file(source, error)) {
    files.push_back({source.filename().string(), fs::file_size(source), ""});
    return files;
  }
  if (!fs::is_directory(source, error)) {
    fail(ExitCode::data, "{} does not exist (relative paths are taken from the repository root)", source.string());
  }
  for (const auto& entry : fs::recursive_directory_iterator(source, fs::directory_options::skip_permission_denied)) {
    if (!entry.is_regular_file()) continue;
    files.push_back({entry.path().lexically_relative(source).generic_string(), entry.file_size(), ""});
  }
  std::sort(files.begin(), files.end(), [](const ListedFile& a, const ListedFile& b) { return a.name < b.name; });
  return files;
}

std::vector<ListedFile> s3_files(const std::string& source, const spec::DataSpec& data) {
  s3::Client client(s3::resolve_connection(connection_options(data)));
  const s3::SourceListing listing = s3::list_source(client, source);
  std::vector<ListedFile> files;
  for (const auto& object : listing.objects) {
    files.push_back({s3::local_path_for_key(object.key, listing.prefix).generic_string(), object.size, object.etag});
  }
  return files;
}

// "1200 files, 3.4 MiB, sha256 1a2b3c4d5e6f": a digest of the names, sizes and ETags, not of the bytes.
std::string describe(const std::vector<ListedFile>& files) {
  std::string listing;
  std::uint64_t bytes = 0;
  for (const auto& file : files) {
    listing += fmt::format("{}\t{}\t{}\n", file.name, file.size, file.etag);
    bytes += file.size;
  }
  return fmt::format("{} files, {:.1f} MiB, sha256 {}", files.size(), static_cast<double>(bytes) / (1 << 20),
                     sha256_hex(listing).substr(0, 12));
}

std::string describe_data(const std::string& source, const spec::DataSpec& data, const fs::path& root) {
  if (s3::is_s3_url(source)) return describe(s3_files(source, data));
  return describe(local_files((root / source).lexically_normal()));
}

// A repository file the run reads ("sha256 <12 hex>"); other references (s3://) are named by the setting.
std::optional<std::string> describe_file(const std::string& reference, const fs::path& root) {
  if (reference.empty() || reference.find("://") != std::string::npos) return std::nullopt;
  const fs::path file = (root / reference).lexically_normal();
  std::error_code error;
  if (!fs::is_regular_file(file, error)) return std::nullopt;  // model loading reports it
  return "sha256 " + sha256_hex(read_file(file, ExitCode::model)).substr(0, 12);
}

// The newest checkpoint file's time in a run directory; nothing when it holds none.
std::optional<fs::file_time_type> newest_checkpoint_time(const fs::path& directory) {
  std::optional<fs::file_time_type> newest;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    if (entry.path().extension() != ".ckpt") continue;
    const auto time = entry.last_write_time(error);
    if (!error && (!newest || time > *newest)) newest = time;
  }
  return newest;
}

}  // namespace

std::string RunIdentity::digest() const {
  std::string text;
  for (const auto& item : items) text += item.name + "=" + item.value + "\n";
  return sha256_hex(text);
}

RunIdentity run_identity(const spec::Spec& spec, const fs::path& root, const std::string& commit) {
  RunIdentity identity;
  identity.commit = commit;
  for (auto& setting : spec::run_settings(spec)) identity.items.push_back({setting.key, setting.toml});
  for (const auto& [key, source] : {std::pair<const char*, const std::string&>{"data.source", spec.data.source},
                                    {"data.valid_source", spec.data.valid_source}}) {
    if (!source.empty()) identity.items.push_back({fmt::format("{} contents", key), describe_data(source, spec.data, root)});
  }
  for (const auto& [key, reference] : {std::pair<const char*, const std::string&>{"model.torchscript", spec.model.torchscript},
                                       {"model.weights", spec.model.weights}}) {
    if (auto contents = describe_file(reference, root)) identity.items.push_back({fmt::format("{} contents", key), *contents});
  }
  return identity;
}

std::vector<std::string> identity_changes(const RunIdentity& before, const RunIdentity& now) {
  std::map<std::string, std::string> old_values;
  for (const auto& item : before.items) old_values[item.name] = item.value;
  std::vector<std::string> changes;
  for (const auto& item : now.items) {
    const auto old = old_values.find(item.name);
    if (old == old_values.end()) {
      changes.push_back(fmt::format("{}: (not recorded) -> {}", item.name, item.value));
    } else if (old->second != item.value) {
      changes.push_back(fmt::format("{}: {} -> {}", item.name, old->second, item.value));
    }
    if (old != old_values.end()) old_values.erase(old);
  }
  for (const auto& [name, value] : old_values) changes.push_back(fmt::format("{}: {} -> (none)", name, value));
  return changes;
}

nlohmann::json identity_json(const RunIdentity& identity) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& item : identity.items) items.push_back({{"name", item.name}, {"value", item.value}});
  return {{"digest", identity.digest()}, {"commit", identity.commit}, {"items", items}};
}

RunIdentity identity_from_json(const nlohmann::json& json, const std::string& origin) {
  RunIdentity identity;
  try {
    identity.commit = json.at("commit").get<std::string>();
    for (const auto& item : json.at("items")) {
      identity.items.push_back({item.at("name").get<std::string>(), item.at("value").get<std::string>()});
    }
  } catch (const nlohmann::json::exception&) {
    rethrow_as(ExitCode::output, "{}: not a trainpoint run identity", origin);
  }
  return identity;
}

fs::path run_checkpoints(const fs::path& checkpoints_root, const RunIdentity& identity) {
  return checkpoints_root / identity.key();
}

std::optional<fs::path> record_identity(const fs::path& run_directory, const RunIdentity& identity) {
  const fs::path file = run_directory / kIdentityFile;
  if (fs::exists(file)) return std::nullopt;
  fs::create_directories(run_directory);
  write_file_atomic(file, identity_json(identity).dump(2) + "\n");
  return file;
}

std::optional<fs::path> require_same_run(const RunIdentity& now, const fs::path& checkpoints_root,
                                         const std::string& output_name) {
  const fs::path mine = run_checkpoints(checkpoints_root, now);
  if (newest_checkpoint_time(mine)) return mine;
  // The other runs with checkpoints here; the newest is the one this run is taken to continue.
  std::optional<fs::path> newest_run;
  fs::file_time_type newest_time;
  std::size_t other_runs = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(checkpoints_root, error)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / kIdentityFile)) continue;
    const auto time = newest_checkpoint_time(entry.path());
    if (!time) continue;
    ++other_runs;
    if (!newest_run || *time > newest_time) {
      newest_run = entry.path();
      newest_time = *time;
    }
  }
  if (!newest_run) return std::nullopt;
  const fs::path identity_file = *newest_run / kIdentityFile;
  const RunIdentity before = identity_from_json(
      nlohmann::json::parse(read_file(identity_file, ExitCode::output), nullptr, false), identity_file.string());
  const std::vector<std::string> changes = identity_changes(before, now);
  fail(ExitCode::spec,
       "job.output {} holds the checkpoints of another run{} ({}, commit {}); this run differs in: {}. To start "
       "this run, give it another job.output, or set checkpoint.resume = \"never\" to train from scratch beside "
       "them (nothing is deleted); to continue that run, restore its settings",
       output_name, other_runs > 1 ? fmt::format(" (the newest of {})", other_runs) : "", newest_run->string(),
       before.commit.empty() ? "none" : before.commit, fmt::join(changes, "; "));
}

}  // namespace tp::storage
