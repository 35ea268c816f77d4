#include "s3/paths.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace tp::s3 {
namespace {

bool valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const std::size_t length = byte < 0x80           ? 1
                               : (byte >> 5) == 0x6  ? 2
                               : (byte >> 4) == 0xE  ? 3
                               : (byte >> 3) == 0x1E ? 4
                                                     : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (std::size_t j = 1; j < length; ++j) {
      if ((static_cast<unsigned char>(text[i + j]) >> 6) != 0x2) return false;
    }
    i += length;
  }
  return true;
}

// The key as it can be shown in a log line: bytes outside printable ASCII as \xNN.
std::string printable(const std::string& key) {
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace

S3Url parse_s3_url(const std::string& url) {
  if (url.rfind("s3://", 0) != 0) fail(ExitCode::usage, "'{}' is not an s3://bucket/key URL", url);
  const std::string rest = url.substr(5);
  const auto slash = rest.find('/');
  S3Url parsed{rest.substr(0, slash), slash == std::string::npos ? "" : rest.substr(slash + 1)};
  if (parsed.bucket.empty()) fail(ExitCode::usage, "'{}' names no bucket", url);
  return parsed;
}

bool is_s3_url(const std::string& location) { return location.rfind("s3://", 0) == 0; }

std::string directory_prefix(const std::string& prefix) {
  return prefix.empty() || prefix.back() == '/' ? prefix : prefix + "/";
}

bool is_folder_marker(const ObjectInfo& object) {
  return !object.key.empty() && object.key.back() == '/';
}

bool is_temporary_download(const std::string& file_name) {
  if (file_name.empty() || file_name.front() != '.') return false;
  const auto marker = file_name.rfind(".tmp-");
  if (marker == std::string::npos || marker == 0) return false;
  const std::string suffix = file_name.substr(marker + 5);
  const auto dash = suffix.find('-');
  auto digits = [](const std::string& text) {
    return !text.empty() &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return dash != std::string::npos && digits(suffix.substr(0, dash)) && digits(suffix.substr(dash + 1));
}

std::filesystem::path local_path_for_key(const std::string& key, const std::string& prefix) {
  auto reject = [&](const std::string& why) {
    fail(ExitCode::data, "S3 key '{}' cannot be staged: {}", printable(key), why);
  };
  // S3 lists only keys under the prefix asked for; a server that sends others is not trusted with paths.
  if (key.compare(0, prefix.size(), prefix) != 0) reject("it is not under the listed prefix '" + printable(prefix) + "'");
  const std::string relative = key.substr(prefix.size());
  if (relative.empty()) reject("it names the prefix itself");
  if (!valid_utf8(relative)) reject("it is not valid UTF-8");
  for (unsigned char c : relative) {
    if (c < 0x20 || c == 0x7F) reject("it holds a control character");
  }
  std::filesystem::path path;
  std::size_t start = 0;
  while (start <= relative.size()) {
    const auto end = std::min(relative.find('/', start), relative.size());
    const std::string segment = relative.substr(start, end - start);
    if (segment.empty()) reject("it has an empty path segment (a leading '/' or '//')");
    if (segment == "." || segment == "..") reject("it has a '.' or '..' segment");
    if (segment.size() > 255) reject("a path segment is longer than 255 bytes");
    if (segment.rfind(".trainpoint-s3", 0) == 0 || is_temporary_download(segment)) {
      reject("it looks like one of trainpoint's own files");
    }
    path /= segment;
    start = end + 1;
  }
  return path;
}

std::vector<std::vector<std::size_t>> shard_by_bytes(const std::vector<ObjectInfo>& objects, int world_size) {
  if (world_size < 1) fail(ExitCode::usage, "world size {} is not positive", world_size);
  std::vector<std::size_t> order(objects.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return objects[a].size > objects[b].size; });
  std::vector<std::vector<std::size_t>> shares(static_cast<std::size_t>(world_size));
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(world_size), 0);
  for (const std::size_t index : order) {
    const auto lightest =
        static_cast<std::size_t>(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
    shares[lightest].push_back(index);
    bytes[lightest] += objects[index].size;
  }
  for (auto& share : shares) std::sort(share.begin(), share.end());
  return shares;
}

}  // namespace tp::s3
