// Staging a dataset from S3 to local disk for training, and uploading outputs to S3.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "s3/client.h"
#include "s3/credentials.h"

namespace tp::s3 {

enum class Sharding {
  all,    // every rank (node) stages every object
  shard,  // each rank stages only its share, balanced by bytes
};

// The objects a source names: everything under s3://bucket/prefix/ (folder markers left out) or, when
// nothing is there, the single object s3://bucket/key.
struct SourceListing {
  std::vector<ObjectInfo> objects;  // in key order
  std::string prefix;               // the key prefix that local paths start after
  std::uint64_t bytes = 0;
};
// Throws tp::Error(data) when the bucket does not exist or holds nothing there; usage for rejected credentials.
SourceListing list_source(Client& client, const std::string& source);

// How staging tells a file already in the destination from one it must fetch.
enum class Reuse {
  // The cache journal and lock (kCacheJournalName, kLockName) kept in the destination: the ETag and size
  // each file was fetched with, shared by the ranks of a node. Training's staging.
  journal,
  // Nothing of trainpoint's own in the destination: a file of the object's size, whose MD5 matches the
  // ETag where that is an MD5 (multipart objects: the size alone). `s3 cp` and `s3 sync`, whose
  // destination must hold only what the bucket holds.
  contents,
};

struct StageRequest {
  std::string source;                 // s3://bucket/prefix (or s3://bucket/key of one object)
  std::filesystem::path destination;  // local root; also the cache, shared by the ranks of a node
  int rank = 0;
  int world_size = 1;
  // Ranks on one node are contiguous (rank = node * local_world_size + local_rank). They share the
  // destination: the first to get its lock stages the node's objects, the others find them cached.
  int local_rank = 0;
  int local_world_size = 1;
  Sharding sharding = Sharding::all;
  Reuse reuse = Reuse::journal;
  ConnectionOptions connection;
  TransferSettings transfer;
};

struct StagedObject {
  std::string key;
  std::filesystem::path relative_path;  // under StagedData::root
  std::uint64_t size = 0;
  std::string etag;
};

struct StagedData {
  std::filesystem::path root;
  std::vector<StagedObject> objects;  // this rank's objects (all of them for Sharding::all), in key order
  std::uint64_t bytes = 0;            // of `objects`
  std::size_t downloaded = 0;         // objects fetched by this call (for the node)
  std::size_t cached = 0;             // objects found in the cache with the same ETag
};

// Whether `file` holds the object's contents: the object's size, and its MD5 where the ETag is one (multipart
// objects: the size alone). What Reuse::contents keeps.
bool holds_object(const std::filesystem::path& file, const ObjectInfo& object);

// Lists the source, downloads what the node needs and the cache lacks, and returns this rank's share.
// Throws tp::Error: data (no such bucket/prefix, unsafe key), usage (credentials, TLS), network (retries
// exhausted, retryable), storage/output (local disk).
StagedData stage(const StageRequest& request);

struct UploadRequest {
  std::filesystem::path source;  // a file or a directory (uploaded recursively)
  std::string destination;       // s3://bucket/key for a file; s3://bucket/prefix for a directory or with '/'
  ConnectionOptions connection;
  TransferSettings transfer;
};

// The files an upload sends and the key of each: a file to s3://bucket/key (or into s3://bucket/prefix/),
// or every file under a directory, in key order. Throws tp::Error (output) when `source` cannot be read.
std::vector<UploadItem> upload_plan(const std::filesystem::path& source, const std::string& destination);

// Uploads a checkpoint, a model or an output directory; returns what S3 stored.
std::vector<ObjectInfo> upload(const UploadRequest& request);
// The same with a client the caller already has (the CLI reuses one for several operations).
std::vector<ObjectInfo> upload_with(Client& client, const std::filesystem::path& source,
                                    const std::string& destination);

inline constexpr char kCacheJournalName[] = ".trainpoint-s3-cache.jsonl";
inline constexpr char kLockName[] = ".trainpoint-s3.lock";

}  // namespace tp::s3
