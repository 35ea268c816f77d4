#include "s3/command.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "common/error.h"
#include "s3/checksums.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

int list_command(const S3Command& command) {
  const S3Url url = parse_s3_url(command.source);
  Client client(resolve_connection(command.connection), command.transfer);
  const Listing listing = client.list(url.bucket, url.key, command.recursive ? "" : "/");
  for (const auto& common : listing.common_prefixes) std::printf("%12s %s\n", "PRE", common.c_str());
  for (const auto& object : listing.objects) {
    std::printf("%12llu %s\n", static_cast<unsigned long long>(object.size), object.key.c_str());
  }
  return 0;
}

// What an upload prints: with `verbose`, a line per file as the AWS CLI does; on a terminal, one progress
// line rewritten in place; then a summary (files, bytes, seconds) in every case.
class UploadReport {
 public:
  UploadReport(const std::vector<UploadItem>& items, bool verbose)
      : verbose_(verbose), on_terminal_(isatty(STDOUT_FILENO) != 0), files_(items.size()) {
    for (const auto& item : items) {
      std::error_code error;
      total_bytes_ += fs::file_size(item.source, error);
    }
  }

  // Client::upload's callback (serialized by it).
  void sent(std::uint64_t bytes, bool object_complete) {
    bytes_ += bytes;
    if (object_complete) ++files_done_;
    if (!on_terminal_ || verbose_) return;
    const auto now = std::chrono::steady_clock::now();
    if (files_done_ != files_ && now - last_shown_ < std::chrono::milliseconds(100)) return;
    last_shown_ = now;
    std::printf("\rupload: %zu/%zu files, %s of %s", files_done_, files_, mebibytes(bytes_).c_str(),
                mebibytes(total_bytes_).c_str());
    std::fflush(stdout);
  }

  void finish(const std::string& bucket, const std::vector<UploadItem>& items,
              const std::vector<ObjectInfo>& stored) const {
    if (verbose_) {
      for (std::size_t i = 0; i < items.size(); ++i) {
        std::printf("upload: %s -> s3://%s/%s\n", items[i].source.c_str(), bucket.c_str(), stored[i].key.c_str());
      }
    } else if (on_terminal_ && files_ > 0) {
      std::printf("\n");
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    std::printf("uploaded %zu files, %s, in %.1f s to s3://%s\n", files_, mebibytes(bytes_).c_str(), seconds,
                bucket.c_str());
  }

 private:
  static std::string mebibytes(std::uint64_t bytes) {
    return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  }

  const bool verbose_;
  const bool on_terminal_;
  const std::size_t files_;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t bytes_ = 0;
  std::size_t files_done_ = 0;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_shown_;
};

void upload_files(Client& client, const std::string& bucket, const std::vector<UploadItem>& items, bool verbose) {
  UploadReport report(items, verbose);
  const std::vector<ObjectInfo> stored =
      client.upload(bucket, items, [&](std::uint64_t bytes, bool complete) { report.sent(bytes, complete); });
  report.finish(bucket, items, stored);
}

StageRequest stage_request(const S3Command& command) {
  StageRequest request;
  request.source = command.source;
  request.destination = command.destination;
  request.reuse = Reuse::contents;  // a copy holds only what the bucket holds
  request.connection = command.connection;
  request.transfer = command.transfer;
  return request;
}

int copy_command(const S3Command& command) {
  const std::string& source = command.source;
  const std::string& destination = command.destination;
  if (is_s3_url(source) == is_s3_url(destination))
    fail(ExitCode::usage, "one side of cp must be s3://, the other local");
  if (is_s3_url(destination)) {
    Client client(resolve_connection(command.connection), command.transfer);
    if (fs::is_directory(source) && !command.recursive) {
      fail(ExitCode::usage, "{} is a directory: add --recursive", source);
    }
    upload_files(client, parse_s3_url(destination).bucket, upload_plan(source, destination), command.verbose);
    return 0;
  }
  if (command.recursive) {
    const StagedData staged = stage(stage_request(command));
    std::printf("downloaded %zu objects, %zu already present, into %s\n", staged.downloaded, staged.cached,
                staged.root.c_str());
    return 0;
  }
  const S3Url url = parse_s3_url(source);
  Client client(resolve_connection(command.connection), command.transfer);
  const auto object = client.head(url.bucket, url.key);
  if (!object) fail(ExitCode::data, "no object {} at {}", source, client.connection().endpoint);
  fs::path target = destination;
  if (fs::is_directory(target) || destination.back() == '/') target /= fs::path(url.key).filename();
  client.download(url.bucket, {DownloadItem{*object, target}});
  std::printf("download: %s -> %s\n", source.c_str(), target.c_str());
  return 0;
}

int sync_command(const S3Command& command) {
  const std::string& source = command.source;
  const std::string& destination = command.destination;
  if (is_s3_url(source) == is_s3_url(destination))
    fail(ExitCode::usage, "one side of sync must be s3://, the other local");
  if (is_s3_url(source)) {
    const StagedData staged = stage(stage_request(command));
    std::printf("downloaded %zu objects, %zu unchanged, into %s\n", staged.downloaded, staged.cached,
                staged.root.c_str());
    return 0;
  }
  // Upload the files that S3 lacks or holds with another size or content (MD5 against a single-part ETag).
  if (!fs::is_directory(source)) fail(ExitCode::usage, "sync uploads a directory; {} is not one", source);
  const S3Url url = parse_s3_url(destination);
  const std::string prefix = directory_prefix(url.key);
  Client client(resolve_connection(command.connection), command.transfer);
  std::map<std::string, ObjectInfo> remote;
  for (auto& object : client.list(url.bucket, prefix).objects) remote[object.key] = object;
  std::vector<UploadItem> items;
  std::size_t unchanged = 0;
  for (const auto& entry : fs::recursive_directory_iterator(source)) {
    if (!entry.is_regular_file()) continue;
    const std::string key = prefix + fs::relative(entry.path(), source).generic_string();
    const auto found = remote.find(key);
    const bool same = found != remote.end() && found->second.size == entry.file_size() &&
                      (!etag_is_md5(found->second.etag) || found->second.etag == file_md5_hex(entry.path()));
    if (same) {
      ++unchanged;
    } else {
      items.push_back({entry.path(), key});
    }
  }
  upload_files(client, url.bucket, items, command.verbose);
  std::printf("%zu files unchanged\n", unchanged);
  return 0;
}

}  // namespace

int run_s3_command(const S3Command& command) {
  switch (command.verb) {
    case Verb::ls: return list_command(command);
    case Verb::cp: return copy_command(command);
    case Verb::sync: return sync_command(command);
  }
  throw std::logic_error("unhandled s3 verb " + std::to_string(static_cast<int>(command.verb)));
}

}  // namespace tp::s3
