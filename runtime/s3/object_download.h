// A download of one listed object into a temporary sibling of its target, verified, then renamed into place:
// the whole-object GET (resumed with Range where a transfer was cut), and what a ranged download
// (s3/ranged_download.h) shares with it: the temporary file and its commit, the check of the bytes against
// what S3 says they are, and the failure of an object deleted after it was listed.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/transfer.h"
#include "s3/checksums.h"
#include "s3/file_ranges.h"
#include "s3/object.h"
#include "s3/sender.h"

namespace tp::s3 {

struct DownloadItem {
  ObjectInfo object;
  std::filesystem::path target;
};

// A download's temporary sibling of its target: created by open(), renamed over the target by commit(),
// removed if the download ends without one. Not copyable: one owner removes it.
class DownloadFile {
 public:
  explicit DownloadFile(const std::filesystem::path& target);
  ~DownloadFile();

  // Creates the temporary file; throws tp::Error (output or storage class).
  void open();
  bool is_open() const { return fd_ != nullptr; }
  int fd() const { return fd_->get(); }
  const std::filesystem::path& temporary() const { return temporary_; }
  // Closes the file and renames it over the target; throws tp::Error (output or storage class).
  void commit();
  // Closes and removes the temporary file.
  void discard();

 private:
  std::filesystem::path target_;
  std::filesystem::path temporary_;
  std::unique_ptr<FileDescriptor> fd_;
  bool committed_ = false;
};

// The whole-object checksum S3 sent (x-amz-checksum-*, asked for with checksum mode), if any, cheapest first.
std::optional<StoredChecksum> sent_checksum(const http::Response& response);

// Fails (network) when a GET finds the object it listed a moment ago gone: deleted since. A restarted job
// lists again, so the failure is worth a retry of the job.
void fail_if_deleted_after_listing(const http::Response& response, const std::string& what);

// Why the bytes received are not the object S3 stores, or none. `digest` is their raw digest: by the
// algorithm of `stored`, the checksum S3 keeps with the object, when there is one; else their MD5, which a
// single-part ETag must be (a multipart object without a checksum has only its size checked). `hashed`
// says in the message what was hashed ("", " of the downloaded ranges").
std::optional<std::string> digest_mismatch(const ObjectInfo& object,
                                           const std::optional<StoredChecksum>& stored,
                                           const std::string& digest, std::string_view hashed);

// Downloads the object in one GET, verified by the size and digest_mismatch, into item.target. A cut
// transfer resumes with Range (If-Match the listed ETag); a body that fails the check is fetched again.
void download_whole(const Channel& channel, const std::string& bucket, const DownloadItem& item);

}  // namespace tp::s3
