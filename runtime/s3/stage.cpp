#include "s3/stage.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "s3/checksums.h"
#include "s3/paths.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

struct CacheEntry {
  std::string endpoint;
  std::string bucket;
  std::string key;
  std::string etag;
  std::uint64_t size = 0;
  bool operator==(const CacheEntry& other) const {
    return endpoint == other.endpoint && bucket == other.bucket && key == other.key && etag == other.etag &&
           size == other.size;
  }
};

// What the destination holds, keyed by relative path: one JSON line appended per object once it is in
// place, so a killed run loses at most the lines of objects it had not finished (they are fetched again).
class CacheJournal {
 public:
  explicit CacheJournal(const fs::path& root) : root_(root), path_(root / kCacheJournalName) {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      const auto json = nlohmann::json::parse(line, nullptr, false);
      if (json.is_discarded() || !json.is_object()) continue;  // a line cut by a kill
      try {
        entries_[json.at("path").get<std::string>()] =
            CacheEntry{json.at("endpoint").get<std::string>(), json.at("bucket").get<std::string>(),
                       json.at("key").get<std::string>(), json.at("etag").get<std::string>(),
                       json.at("size").get<std::uint64_t>()};
      } catch (const nlohmann::json::exception&) {
        continue;
      }
    }
  }
  ~CacheJournal() {
    if (append_fd_ >= 0) ::close(append_fd_);
  }

  // The file is there, the same size, and was fetched from the same object version.
  bool holds(const fs::path& relative, const CacheEntry& wanted) const {
    const auto found = entries_.find(relative.generic_string());
    if (found == entries_.end() || !(found->second == wanted)) return false;
    return has_size(root_ / relative, wanted.size);
  }

  void record(const fs::path& relative, const CacheEntry& entry) {
    entries_[relative.generic_string()] = entry;
    if (append_fd_ < 0) append_fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const std::string line = to_json(relative.generic_string(), entry).dump() + "\n";
    // One write per line: O_APPEND keeps lines whole; a failure only costs a re-download later.
    if (append_fd_ < 0 ||
        ::write(append_fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      spdlog::warn("s3: cannot append to the cache journal {}: {}", path_.string(), std::strerror(errno));
    }
  }

  // Rewrites the journal with one line per file, dropping superseded lines.
  void compact() {
    std::string content;
    for (const auto& [relative, entry] : entries_) content += to_json(relative, entry).dump() + "\n";
    write_file_atomic(path_, content);
  }

 private:
  static nlohmann::json to_json(const std::string& relative, const CacheEntry& entry) {
    return {{"path", relative}, {"endpoint", entry.endpoint}, {"bucket", entry.bucket},
            {"key", entry.key}, {"etag", entry.etag},         {"size", entry.size}};
  }

  fs::path root_;
  fs::path path_;
  std::map<std::string, CacheEntry> entries_;
  int append_fd_ = -1;
};

// An exclusive lock on the destination for the ranks of one node; released when the process exits.
class DestinationLock {
 public:
  explicit DestinationLock(const fs::path& root) {
    const fs::path path = root / kLockName;
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail(ExitCode::output, "cannot create {}: {}", path.string(), std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      spdlog::info("s3: another rank on this node is staging into {}; waiting for it", root.string());
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~DestinationLock() { ::close(fd_); }
  DestinationLock(const DestinationLock&) = delete;
  DestinationLock& operator=(const DestinationLock&) = delete;

 private:
  int fd_;
};

// Temporary files left by a killed run: never taken as data, removed so they do not fill the disk.
void remove_stale_temporaries(const fs::path& root) {
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(root, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file(error) && is_temporary_download(it->path().filename().string())) {
      fs::remove(it->path(), error);
    }
  }
}

// The destination, created, as an absolute path.
fs::path create_destination(const fs::path& destination) {
  std::error_code error;
  fs::create_directories(destination, error);
  if (error) fail(ExitCode::output, "cannot create {}: {}", destination.string(), error.message());
  return fs::absolute(destination);
}

// Which objects a rank returns, and which its node stages (the union of its ranks' shares).
struct NodeShare {
  std::vector<std::size_t> mine;
  std::set<std::size_t> node;
};

NodeShare node_share(const StageRequest& request, const std::vector<ObjectInfo>& objects) {
  NodeShare share;
  if (request.sharding == Sharding::all) {
    for (std::size_t i = 0; i < objects.size(); ++i) share.mine.push_back(i);
    share.node.insert(share.mine.begin(), share.mine.end());
    return share;
  }
  const auto shares = shard_by_bytes(objects, request.world_size);
  share.mine = shares[static_cast<std::size_t>(request.rank)];
  const int first = request.rank - request.local_rank;
  for (int rank = std::max(0, first); rank < std::min(request.world_size, first + request.local_world_size);
       ++rank) {
    share.node.insert(shares[static_cast<std::size_t>(rank)].begin(),
                      shares[static_cast<std::size_t>(rank)].end());
  }
  share.node.insert(share.mine.begin(), share.mine.end());
  return share;
}

// Brings objects of a listing into the destination root: those not already in place are downloaded and,
// with a journal, each is recorded once it lands.
class NodeStaging {
 public:
  // `relative_paths[i]`: where object i lands under `root`.
  NodeStaging(Client& client, std::string bucket, const SourceListing& listing,
              std::vector<fs::path> relative_paths, fs::path root, CacheJournal* journal)
      : client_(client),
        bucket_(std::move(bucket)),
        listing_(listing),
        relative_paths_(std::move(relative_paths)),
        root_(std::move(root)),
        journal_(journal) {}
  const fs::path& relative_path(std::size_t index) const { return relative_paths_[index]; }

  // Fetches the objects of `indices` that are not in place; the staged data's root and counts.
  StagedData fetch(const std::set<std::size_t>& indices) {
    StagedData staged;
    staged.root = root_;
    std::vector<DownloadItem> downloads;
    std::map<std::string, std::size_t> index_of_key;
    std::uint64_t download_bytes = 0;
    for (const std::size_t index : indices) {
      const ObjectInfo& object = listing_.objects[index];
      if (in_place(index)) {
        ++staged.cached;
        continue;
      }
      downloads.push_back({object, root_ / relative_paths_[index]});
      index_of_key[object.key] = index;
      download_bytes += object.size;
    }
    spdlog::info("s3: staging {} objects ({} bytes) from s3://{}/{} into {}; {} already cached",
                 downloads.size(), download_bytes, bucket_, listing_.prefix, root_.string(), staged.cached);
    if (!downloads.empty()) download(downloads, index_of_key);
    staged.downloaded = downloads.size();
    return staged;
  }

 private:
  CacheEntry entry_for(const ObjectInfo& object) const {
    return CacheEntry{client_.connection().endpoint, bucket_, object.key, object.etag, object.size};
  }

  bool in_place(std::size_t index) const {
    const ObjectInfo& object = listing_.objects[index];
    if (journal_ != nullptr) return journal_->holds(relative_paths_[index], entry_for(object));
    return holds_object(root_ / relative_paths_[index], object);
  }

  void download(const std::vector<DownloadItem>& downloads,
                const std::map<std::string, std::size_t>& index_of_key) {
    log::Progress progress("s3 staging", downloads.size(), "objects");
    client_.download(bucket_, downloads, [&](const DownloadItem& item) {
      const std::size_t index = index_of_key.at(item.object.key);
      if (journal_ != nullptr) journal_->record(relative_paths_[index], entry_for(item.object));
      progress.advance();
    });
    progress.finish();
    if (journal_ != nullptr) journal_->compact();
  }

  Client& client_;
  const std::string bucket_;
  const SourceListing& listing_;
  const std::vector<fs::path> relative_paths_;
  const fs::path root_;
  CacheJournal* journal_;  // none: files are checked by their size and MD5 ETag
};

}  // namespace

bool holds_object(const fs::path& file, const ObjectInfo& object) {
  return has_size(file, object.size) && (!etag_is_md5(object.etag) || file_md5_hex(file) == object.etag);
}

SourceListing list_source(Client& client, const std::string& source) {
  const S3Url url = parse_s3_url(source);
  // A prefix names a "directory"; when nothing is under it, it may be the key of a single object.
  SourceListing listing;
  listing.prefix = directory_prefix(url.key);
  listing.objects = client.list(url.bucket, listing.prefix).objects;
  listing.objects.erase(std::remove_if(listing.objects.begin(), listing.objects.end(), is_folder_marker),
                        listing.objects.end());
  if (listing.objects.empty() && !url.key.empty() && url.key.back() != '/') {
    if (auto single = client.head(url.bucket, url.key)) {
      listing.objects.push_back(*single);
      listing.prefix = url.key.substr(0, url.key.rfind('/') + 1);
    }
  }
  if (listing.objects.empty())
    fail(ExitCode::data, "no objects under {} at {}", source, client.connection().endpoint);
  for (const auto& object : listing.objects) listing.bytes += object.size;
  return listing;
}

StagedData stage(const StageRequest& request) {
  const S3Url source = parse_s3_url(request.source);
  if (request.world_size < 1 || request.rank < 0 || request.rank >= request.world_size) {
    fail(ExitCode::usage, "rank {} is not in a world of {}", request.rank, request.world_size);
  }
  const fs::path root = create_destination(request.destination);
  const bool journaled = request.reuse == Reuse::journal;
  std::optional<DestinationLock> lock;
  if (journaled) lock.emplace(root);
  Client client(resolve_connection(request.connection), request.transfer);
  const SourceListing listing = list_source(client, request.source);
  std::vector<fs::path> relative_paths;
  relative_paths.reserve(listing.objects.size());
  for (const auto& object : listing.objects)
    relative_paths.push_back(local_path_for_key(object.key, listing.prefix));
  const NodeShare share = node_share(request, listing.objects);

  remove_stale_temporaries(root);
  std::optional<CacheJournal> journal;
  if (journaled) journal.emplace(root);
  NodeStaging staging(client, source.bucket, listing, std::move(relative_paths), root,
                      journal ? &*journal : nullptr);
  StagedData staged = staging.fetch(share.node);
  for (const std::size_t index : share.mine) {
    const ObjectInfo& object = listing.objects[index];
    staged.objects.push_back({object.key, staging.relative_path(index), object.size, object.etag});
    staged.bytes += object.size;
  }
  return staged;
}

std::vector<UploadItem> upload_plan(const fs::path& source, const std::string& destination) {
  const S3Url target = parse_s3_url(destination);
  std::vector<UploadItem> items;
  std::error_code error;
  if (fs::is_directory(source, error)) {
    const std::string prefix = directory_prefix(target.key);
    for (auto it = fs::recursive_directory_iterator(source, error);
         !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (it->is_regular_file()) {
        items.push_back({it->path(), prefix + fs::relative(it->path(), source).generic_string()});
      }
    }
    if (error) fail(ExitCode::output, "cannot read directory {}: {}", source.string(), error.message());
    std::sort(items.begin(), items.end(),
              [](const UploadItem& a, const UploadItem& b) { return a.key < b.key; });
  } else if (fs::is_regular_file(source, error)) {
    const bool into_prefix = target.key.empty() || target.key.back() == '/';
    items.push_back({source, into_prefix ? target.key + source.filename().string() : target.key});
  } else {
    fail(ExitCode::output, "{} is not a file or a directory", source.string());
  }
  return items;
}

std::vector<ObjectInfo> upload_with(Client& client, const fs::path& source, const std::string& destination) {
  const std::vector<UploadItem> items = upload_plan(source, destination);
  if (items.empty()) return {};
  spdlog::info("s3: uploading {} files from {} to {}", items.size(), source.string(), destination);
  return client.upload(parse_s3_url(destination).bucket, items);
}

std::vector<ObjectInfo> upload(const UploadRequest& request) {
  Client client(resolve_connection(request.connection), request.transfer);
  return upload_with(client, request.source, request.destination);
}

}  // namespace tp::s3
