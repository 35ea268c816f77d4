#include "s3/command.h"

#include <fcntl.h>
#include <unistd.h>

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
    "       trainpoint s3 cp SOURCE DESTINATION [--recursive]   (one side s3://, the other local)\n"
    "       trainpoint s3 sync SOURCE DESTINATION                (s3:// prefix <-> local directory)\n"
    "options: --endpoint URL --region NAME --credentials FILE --tenant NAME --ca-bundle FILE\n"
    "         --parallelism N --part-size-mib N";

struct Arguments {
  std::string verb;
  std::vector<std::string> positional;
  bool recursive = false;
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

std::string file_md5_hex(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ExitCode::output, "cannot read {}", path.string());
  Digest md5(Digest::Algorithm::md5);
  std::vector<char> buffer(1 << 20);
  ssize_t got = 0;
  while ((got = ::read(fd, buffer.data(), buffer.size())) > 0)
    md5.update(buffer.data(), static_cast<std::size_t>(got));
  ::close(fd);
  if (got < 0) fail(ExitCode::output, "cannot read {}", path.string());
  return hex(md5.finish());
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

StageRequest stage_request(const Arguments& arguments, const std::string& source,
                           const fs::path& destination) {
  StageRequest request;
  request.source = source;
  request.destination = destination;
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
    for (const auto& object : upload_with(client, source, destination)) {
      std::printf("upload: %s -> s3://%s/%s\n", source.c_str(), parse_s3_url(destination).bucket.c_str(),
                  object.key.c_str());
    }
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
  client.upload(url.bucket, items);
  std::printf("uploaded %zu files, %zu unchanged\n", items.size(), unchanged);
  return 0;
}

}  // namespace

int run_s3_command(const std::vector<std::string>& args) {
  const Arguments arguments = parse(args);
  if (arguments.verb == "ls") return list_command(arguments);
  if (arguments.verb == "cp") return copy_command(arguments);
  if (arguments.verb == "sync") return sync_command(arguments);
  fail(ExitCode::usage, "unknown s3 command '{}'\n{}", arguments.verb, kUsage);
}

}  // namespace tp::s3
