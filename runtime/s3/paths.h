// Mapping object keys to local paths safely, and splitting a listing between ranks.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "s3/object.h"

namespace tp::s3 {

struct S3Url {
  std::string bucket;
  std::string key;  // the prefix or object key; may be empty
};
// Whether `location` is an s3:// URL (rather than a local path).
bool is_s3_url(const std::string& location);
// Parses "s3://bucket/key"; throws tp::Error(usage) for anything else.
S3Url parse_s3_url(const std::string& url);

// The path under the destination for a key below `prefix`. Throws tp::Error(data), naming the key, for a
// key that could escape the destination or cannot be a file name: "..", ".", empty segments, a leading
// '/', control bytes, invalid UTF-8, segments over 255 bytes, or names trainpoint uses for its own files.
std::filesystem::path local_path_for_key(const std::string& key, const std::string& prefix);
// `prefix` as a "directory": with a trailing '/' unless it is empty.
std::string directory_prefix(const std::string& prefix);
// A key ending in '/' is a "folder" marker that consoles create: nothing to stage.
bool is_folder_marker(const ObjectInfo& object);
// True for the temporary files downloads write before renaming (".<name>.tmp-<pid>-<n>").
bool is_temporary_download(const std::string& file_name);

// Splits objects (sorted by key) between `world_size` ranks, balanced by bytes: largest first, each to the
// rank with the fewest bytes so far (lowest rank on ties). Same listing, same split, on every rank.
// Returns, per rank, indices into `objects` in key order.
std::vector<std::vector<std::size_t>> shard_by_bytes(const std::vector<ObjectInfo>& objects, int world_size);

}  // namespace tp::s3
