#include "s3/command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "common/error.h"
#include "s3/checksums.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: trainpoint s3 ls s3://bucket[/prefix] [--recursive]\n"
    "       trainpoint s3 cp SOURCE DESTINATION [--recursive] [--verbose]   (one side s3://, the other local)\n"
    "       trainpoint s3 sync SOURCE DESTINATION                (s3:// prefix <-> local directory)\n"
    "options: --endpoint URL --region NAME --credentials FILE --tenant NAME --ca-bundle FILE\n"
    "         --parallelism N --part-size-mib N";

// What `trainpoint s3 --help` adds to the usage.
constexpr char kOptions[] =
    "\noptions:\n"
    "  -r, --recursive      ls: every key under the prefix; cp: a whole directory or prefix (verified; same files skipped)\n"
    "  -v, --verbose        cp, sync: a line per file uploaded (by default a progress line on a terminal, then a\n"
    "                       summary: files, bytes, seconds)\n"
    "  --endpoint URL       the S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, S3_ENDPOINT_URL,\n"
    "                       MINIO_URL, else AWS)\n"
    "  --region NAME        the signing region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1)\n"
    "  --credentials FILE   keys from this file (shell export lines or JSON); default: the chain of docs/s3.md\n"
    "  --tenant NAME        the MinIO tenant whose Vault secret /vault/secrets/minio-NAME holds the keys\n"
    "  --ca-bundle FILE     PEM file of extra CAs trusted for HTTPS\n"
    "  --parallelism N      transfers in flight (default 16)\n"
    "  --part-size-mib N    multipart part size in MiB (default 8)\n"
    "Exit codes: 0 success; 2 bad arguments; 1-127 permanent failures; 128-255 retryable (docs/exit-codes.md).";

struct Arguments {
  std::string verb;
  std::vector<std::string> positional;
  bool recursive = false;
  bool verbose = false;
  ConnectionOptions connection;
  TransferSettings transfer;
};

Arguments parse(const std::vector<std::string>& args) {
  if (args.empty()) fail(ExitCode::usage, "{}", kUsage);
  Arguments parsed;
  parsed.verb = args[0];
  std::map<std::string, std::string*> string_options = {
      {"--endpoint", &parsed.connection.endpoint},
      {"--region", &parsed.connection.region},
      {"--credentials", &parsed.connection.credentials_file},
      {"--tenant", &parsed.connection.tenant},
      {"--ca-bundle", &parsed.connection.ca_bundle},
  };
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--recursive" || word == "-r") {
      parsed.recursive = true;
    } else if (word == "--verbose" || word == "-v") {
      parsed.verbose = true;
    } else if (string_options.count(word) != 0 || word == "--parallelism" || word == "--part-size-mib") {
      if (i + 1 >= args.size()) fail(ExitCode::usage, "{} needs a value\n{}", word, kUsage);
      const std::string& value = args[++i];
      if (string_options.count(word) != 0) {
        *string_options[word] = value;
        continue;
      }
      int number = 0;
      try {
        number = std::stoi(value);
      } catch (const std::exception&) {
        number = 0;
      }
      if (number < 1) fail(ExitCode::usage, "{} needs a positive number, not '{}'", word, value);
      if (word == "--parallelism") {
        parsed.transfer.parallelism = number;
      } else {
        parsed.transfer.part_size = static_cast<std::uint64_t>(number) << 20;
      }
    } else if (word.rfind("--", 0) == 0) {
      fail(ExitCode::usage, "unknown option {}\n{}", word, kUsage);
    } else {
      parsed.positional.push_back(word);
    }
  }
  return parsed;
}

int list_command(const Arguments& arguments) {
  if (arguments.positional.size() != 1) fail(ExitCode::usage, "{}", kUsage);
  const S3Url url = parse_s3_url(arguments.positional[0]);
  Client client(resolve_connection(arguments.connection), arguments.transfer);
  const Listing listing = client.list(url.bucket, url.key, arguments.recursive ? "" : "/");
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

StageRequest stage_request(const Arguments& arguments, const std::string& source,
                           const fs::path& destination) {
  StageRequest request;
  request.source = source;
  request.destination = destination;
  request.reuse = Reuse::contents;  // a copy holds only what the bucket holds
  request.connection = arguments.connection;
  request.transfer = arguments.transfer;
  return request;
}

int copy_command(const Arguments& arguments) {
  if (arguments.positional.size() != 2) fail(ExitCode::usage, "{}", kUsage);
  const std::string& source = arguments.positional[0];
  const std::string& destination = arguments.positional[1];
  if (is_s3_url(source) == is_s3_url(destination))
    fail(ExitCode::usage, "one side of cp must be s3://, the other local");
  if (is_s3_url(destination)) {
    Client client(resolve_connection(arguments.connection), arguments.transfer);
    if (fs::is_directory(source) && !arguments.recursive) {
      fail(ExitCode::usage, "{} is a directory: add --recursive", source);
    }
    upload_files(client, parse_s3_url(destination).bucket, upload_plan(source, destination), arguments.verbose);
    return 0;
  }
  if (arguments.recursive) {
    const StagedData staged = stage(stage_request(arguments, source, destination));
    std::printf("downloaded %zu objects, %zu already present, into %s\n", staged.downloaded, staged.cached,
                staged.root.c_str());
    return 0;
  }
  const S3Url url = parse_s3_url(source);
  Client client(resolve_connection(arguments.connection), arguments.transfer);
  const auto object = client.head(url.bucket, url.key);
  if (!object) fail(ExitCode::data, "no object {} at {}", source, client.connection().endpoint);
  fs::path target = destination;
  if (fs::is_directory(target) || destination.back() == '/') target /= fs::path(url.key).filename();
  client.download(url.bucket, {DownloadItem{*object, target}});
  std::printf("download: %s -> %s\n", source.c_str(), target.c_str());
  return 0;
}

int sync_command(const Arguments& arguments) {
  if (arguments.positional.size() != 2) fail(ExitCode::usage, "{}", kUsage);
  const std::string& source = arguments.positional[0];
  const std::string& destination = arguments.positional[1];
  if (is_s3_url(source) == is_s3_url(destination))
    fail(ExitCode::usage, "one side of sync must be s3://, the other local");
  if (is_s3_url(source)) {
    const StagedData staged = stage(stage_request(arguments, source, destination));
    std::printf("downloaded %zu objects, %zu unchanged, into %s\n", staged.downloaded, staged.cached,
                staged.root.c_str());
    return 0;
  }
  // Upload the files that S3 lacks or holds with another size or content (MD5 against a single-part ETag).
  if (!fs::is_directory(source)) fail(ExitCode::usage, "sync uploads a directory; {} is not one", source);
  const S3Url url = parse_s3_url(destination);
  const std::string prefix = directory_prefix(url.key);
  Client client(resolve_connection(arguments.connection), arguments.transfer);
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
  upload_files(client, url.bucket, items, arguments.verbose);
  std::printf("%zu files unchanged\n", unchanged);
  return 0;
}

}  // namespace

int run_s3_command(const std::vector<std::string>& args) {
  // `trainpoint s3 --help`, `trainpoint s3 cp --help`: the usage, as a success.
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end() || (args.size() == 1 && args[0] == "help")) {
    std::printf("%s\n%s\n", kUsage, kOptions);
    return 0;
  }
  const Arguments arguments = parse(args);
  if (arguments.verb == "ls") return list_command(arguments);
  if (arguments.verb == "cp") return copy_command(arguments);
  if (arguments.verb == "sync") return sync_command(arguments);
  fail(ExitCode::usage, "unknown s3 command '{}'\n{}", arguments.verb, kUsage);
}

}  // namespace tp::s3
