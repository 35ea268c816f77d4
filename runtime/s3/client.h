// An S3 client on http/transfer.h (libcurl): ListObjectsV2, HeadObject, verified downloads (ranged parts in
// parallel for large objects), PutObject and multipart upload. Every request is retried under
// common/retry.h's policy on 5xx, 429/SlowDown, timeouts, resets and truncated bodies; a cut download resumes
// with Range.
//
// Memory: each download in flight holds one libcurl receive buffer (http::Settings::receive_buffer_bytes,
// 128 KiB) and gathers what it receives into writes of up to 1 MiB; uploads read 1 MiB at a time to hash,
// and libcurl's 64 KiB upload buffer to send. So transfers use at most parallelism x (128 KiB + 1 MiB +
// 64 KiB), plus the listing (about 200 bytes per key) and one XML page (1 MiB cap). tests/s3 checks the
// bound, for one call; calls that overlap add theirs.
//
// Calls of one Client may overlap: any of them, from any number of threads at once (pack's workers share one
// client). They share only its pool of idle connections (under a lock); each call has its own cancellation,
// so a failed download stops its own transfers, not another call's. A download and an upload of the same
// key at once are S3's to order.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "s3/credentials.h"
#include "s3/multipart_upload.h"
#include "s3/object.h"
#include "s3/object_download.h"
#include "s3/sender.h"

namespace tp::s3 {

struct Listing {
  std::vector<ObjectInfo> objects;
  std::vector<std::string> common_prefixes;  // with a delimiter: the "directories"
};

class Client {
 public:
  Client(Connection connection, TransferSettings settings = {});
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Connection& connection() const { return sender_.connection(); }
  const TransferSettings& settings() const { return sender_.settings(); }

  // Every object under `prefix`, in key order. Throws tp::Error(data) for a missing bucket.
  Listing list(const std::string& bucket, const std::string& prefix, const std::string& delimiter = "");
  std::optional<ObjectInfo> head(const std::string& bucket, const std::string& key);
  // DeleteObject (S3 answers 204 whether or not the key existed).
  void remove(const std::string& bucket, const std::string& key);

  // Downloads each object to its target: into a temporary sibling, verified, then renamed. Verified means
  // the size, and the checksum S3 keeps with the object (x-amz-checksum-*, asked for with checksum mode;
  // a large object's CRC is combined from its ranges', s3/ranged_download.h), or for an object without one
  // the MD5 of a single-part ETag. `on_done` runs once per object, serialized.
  void download(const std::string& bucket, const std::vector<DownloadItem>& items,
                const std::function<void(const DownloadItem&)>& on_done = {});
  // Uploads files (multipart above the threshold, parts in parallel: s3/multipart_upload.h) with a CRC64NVME
  // checksum (a full-object one for multipart uploads) and returns what S3 stored.
  // `on_sent` runs, serialized, for each object or part stored: its bytes, and whether its object is
  // complete.
  using SentCallback = std::function<void(std::uint64_t bytes, bool object_complete)>;
  std::vector<ObjectInfo> upload(const std::string& bucket, const std::vector<UploadItem>& items,
                                 const SentCallback& on_sent = {});

 private:
  Sender sender_;
};

}  // namespace tp::s3
