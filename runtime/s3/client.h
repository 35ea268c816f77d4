// An S3 client on http/transfer.h (libcurl): ListObjectsV2, HeadObject, verified downloads (ranged parts in
// parallel for large objects), PutObject and multipart upload. Every request is retried under common/retry.h's
// policy on 5xx, 429/SlowDown, timeouts, resets and truncated bodies; a cut download resumes with Range.
//
// Memory: each download in flight holds one libcurl receive buffer (http::Settings::receive_buffer_bytes,
// 128 KiB) and gathers what it receives into writes of up to 1 MiB; uploads read 1 MiB at a time to hash,
// and libcurl's 64 KiB upload buffer to send. So transfers use at most parallelism x (128 KiB + 1 MiB +
// 64 KiB), plus the listing (about 200 bytes per key) and one XML page (1 MiB cap). tests/s3 checks the
// bound.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/retry.h"
#include "http/transfer.h"
#include "s3/checksums.h"
#include "s3/credentials.h"
#include "s3/object.h"
#include "s3/sigv4.h"

namespace tp::s3 {

struct TransferSettings {
  int parallelism = 16;  // transfers (objects or parts) in flight
  std::uint64_t part_size = 8ull << 20;
  std::uint64_t parallel_download_threshold = 32ull << 20;  // larger objects download as parallel ranges
  std::uint64_t multipart_upload_threshold = 64ull << 20;   // larger files upload in parts
  RetryPolicy retry;                                  // per request
  int list_page_size = 1000;
  http::Settings http;
};

struct DownloadItem {
  ObjectInfo object;
  std::filesystem::path target;
};

struct UploadItem {
  std::filesystem::path source;
  std::string key;
};

struct Listing {
  std::vector<ObjectInfo> objects;
  std::vector<std::string> common_prefixes;  // with a delimiter: the "directories"
};

class Client {
 public:
  Client(Connection connection, TransferSettings settings = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Connection& connection() const { return connection_; }
  const TransferSettings& settings() const { return settings_; }

  // Every object under `prefix`, in key order. Throws tp::Error(data) for a missing bucket.
  Listing list(const std::string& bucket, const std::string& prefix, const std::string& delimiter = "");
  std::optional<ObjectInfo> head(const std::string& bucket, const std::string& key);
  // DeleteObject (S3 answers 204 whether or not the key existed).
  void remove(const std::string& bucket, const std::string& key);

  // Downloads each object to its target: into a temporary sibling, verified, then renamed. Verified means
  // the size, and the checksum S3 keeps with the object (x-amz-checksum-*, asked for with checksum mode;
  // a large object's CRC is combined from its ranges'), or for an object without one the MD5 of a
  // single-part ETag. `on_done` runs once per object, serialized.
  void download(const std::string& bucket, const std::vector<DownloadItem>& items,
                const std::function<void(const DownloadItem&)>& on_done = {});
  // Uploads files (multipart above the threshold, parts in parallel) with a CRC64NVME checksum (a
  // full-object one for multipart uploads) and returns what S3 stored.
  // `on_sent` runs, serialized, for each object or part stored: its bytes, and whether its object is complete.
  using SentCallback = std::function<void(std::uint64_t bytes, bool object_complete)>;
  std::vector<ObjectInfo> upload(const std::string& bucket, const std::vector<UploadItem>& items,
                                 const SentCallback& on_sent = {});

 private:
  struct Target {
    std::string url;
    std::string host;
    std::string path;  // unencoded, as signed
  };
  struct Call {
    std::string method;
    std::string bucket;
    std::string key;
    QueryList query;
    HeaderList headers;
    std::string payload_sha256 = std::string(kEmptySha256);
    http::BodySource body;
    std::uint64_t body_size = 0;
    http::BodySink sink;
  };
  class HandleLease;

  Target locate(const std::string& bucket, const std::string& key, const QueryList& query) const;
  http::Response send(http::Handle& handle, const Call& call);
  // Runs `attempt` under settings_.retry until it returns no cause (a retryable failure), throws, or
  // the policy gives up (tp::Error(network)).
  void retrying(const std::string& what, const std::function<std::optional<std::string>()>& attempt);
  // No value for an expected status; the cause for a retryable failure; throws for a permanent one.
  std::optional<std::string> check(const http::Response& response, const std::string& what,
                                   std::initializer_list<long> expected) const;
  std::string describe(const std::string& method, const std::string& bucket, const std::string& key) const;
  // Runs count tasks on up to `parallelism` threads, each with its own connection; the first error
  // cancels the rest and is rethrown.
  void run_parallel(std::size_t count, const std::function<void(http::Handle&, std::size_t)>& task);

  void download_whole(http::Handle& handle, const std::string& bucket, const DownloadItem& item);
  // Bytes [begin, end] of `object` into `fd` at the same offset; `checksum`, when given, takes them in order.
  void download_range(http::Handle& handle, const std::string& bucket, const ObjectInfo& object, int fd,
                      std::uint64_t begin, std::uint64_t end, Digest* checksum);
  // The object's whole-object CRC (CRC64NVME or CRC32C) from a HEAD, the checksums that ranges can be
  // combined into; none when it has another or none.
  std::optional<StoredChecksum> combinable_checksum(http::Handle& handle, const std::string& bucket,
                                                    const ObjectInfo& object);
  struct UploadPart {
    std::string upload_id;
    int number;
  };
  // PUTs bytes [begin, begin + size) of `source`: the whole object (PutObject), or with `part` one part of a
  // multipart upload (UploadPart). Their CRC64NVME (x-amz-checksum-crc64nvme) and SHA-256 (signed) are sent;
  // a checksum the server answers with must be the one sent. Returns the ETag and the CRC64NVME (raw).
  struct Stored {
    std::string etag;
    std::string crc64nvme;
  };
  Stored put(http::Handle& handle, const std::string& bucket, const std::string& key,
                  const std::filesystem::path& source, std::uint64_t begin, std::uint64_t size,
                  const std::optional<UploadPart>& part);

  Connection connection_;
  TransferSettings settings_;
  std::mutex idle_handles_mutex_;
  std::vector<std::unique_ptr<http::Handle>> idle_handles_;
  std::atomic<bool> cancel_{false};
};

}  // namespace tp::s3
