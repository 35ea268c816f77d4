#include "s3/object_download.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "common/error.h"
#include "common/files.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

// A whole-object GET's bytes across its attempts: written at their offset and hashed as they come, by the
// checksum S3 sent with the first attempt's answer, else by MD5.
class WholeObjectReceiver {
 public:
  WholeObjectReceiver(const ObjectInfo& object, int fd) : object_(object), writer_(fd, object.size) {}
  std::uint64_t received() const { return progress_.written; }
  // The sink of each attempt.
  bool receive(const http::Response& response, const char* data, std::size_t size);
  void flush_or_fail(const std::string& what, const fs::path& file) { writer_.flush_or_fail(what, file); }
  // Once an attempt has ended: the cause to try again for, or none when the object is complete and verified.
  // Starts over where what was received cannot be kept.
  std::optional<std::string> verdict();

 private:
  struct Progress {
    std::uint64_t written = 0;
    Digest md5{Digest::Algorithm::md5};
    std::optional<Digest> checksum;
    std::optional<StoredChecksum> stored;  // the checksum S3 sent
  };
  const ObjectInfo& object_;
  GatheringWriter writer_;
  Progress progress_;
};

bool WholeObjectReceiver::receive(const http::Response& response, const char* data, std::size_t size) {
  // The first bytes of an answer that starts at the object's first byte (a resumed transfer that the server
  // sent whole again starts over): hashed by the checksum that answer names.
  if (response.sink_bytes == 0 && (progress_.written == 0 || response.status == 200)) {
    progress_ = Progress{};
    progress_.stored = sent_checksum(response);
    if (progress_.stored) progress_.checksum.emplace(progress_.stored->algorithm);
  }
  if (!writer_.write(data, size, progress_.written)) return false;
  if (progress_.checksum) {
    progress_.checksum->update(data, size);
  } else {
    progress_.md5.update(data, size);
  }
  progress_.written += size;
  return true;
}

std::optional<std::string> WholeObjectReceiver::verdict() {
  if (progress_.written != object_.size) {
    const std::string cause = fmt::format("body cut short: {} of {} bytes", progress_.written, object_.size);
    if (progress_.written > object_.size) progress_ = Progress{};
    return cause;
  }
  const std::string digest = progress_.checksum ? progress_.checksum->finish() : progress_.md5.finish();
  std::optional<std::string> mismatch = digest_mismatch(object_, progress_.stored, digest, "");
  if (mismatch) progress_ = Progress{};  // corrupted in transit: fetch it all again
  return mismatch;
}

}  // namespace

DownloadFile::DownloadFile(const fs::path& target) : target_(target), temporary_(temporary_sibling(target)) {}

DownloadFile::~DownloadFile() {
  if (!committed_) discard();
}

void DownloadFile::open() {
  fd_ = std::make_unique<FileDescriptor>(open_for_writing(temporary_));
}

void DownloadFile::commit() {
  fd_.reset();
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    fail(write_failure_class(errno), "cannot rename {} to {}: {}", temporary_.string(), target_.string(),
         std::strerror(errno));
  }
  committed_ = true;
}

void DownloadFile::discard() {
  fd_.reset();
  std::error_code ignored;
  fs::remove(temporary_, ignored);
}

std::optional<StoredChecksum> sent_checksum(const http::Response& response) {
  for (const ChecksumHeader& candidate : kChecksumHeaders) {
    const std::string& value = response.header(candidate.header);
    // A composite checksum of a multipart object ("<base64>-<parts>") is not a whole-object checksum.
    if (!value.empty() && value.find('-') == std::string::npos)
      return StoredChecksum{candidate.algorithm, value};
  }
  return std::nullopt;
}

void fail_if_deleted_after_listing(const http::Response& response, const std::string& what) {
  if (response.transport == http::Transport::ok && response.status == 404)
    fail(ExitCode::network, "{}: the object was deleted after it was listed (HTTP 404)", what);
}

std::optional<std::string> digest_mismatch(const ObjectInfo& object,
                                           const std::optional<StoredChecksum>& stored,
                                           const std::string& digest, std::string_view hashed) {
  if (stored) {
    const std::string actual = base64(digest);
    if (actual == stored->value) return std::nullopt;
    return fmt::format("checksum {}{} does not match x-amz-checksum {}", actual, hashed, stored->value);
  }
  if (!etag_is_md5(object.etag)) return std::nullopt;
  const std::string actual = hex(digest);
  if (actual == object.etag) return std::nullopt;
  return fmt::format("MD5 {}{} does not match ETag {}", actual, hashed, object.etag);
}

void download_whole(const Channel& channel, const std::string& bucket, const DownloadItem& item) {
  const std::string what = channel.sender().describe("GET", bucket, item.object.key);
  DownloadFile file(item.target);
  file.open();
  WholeObjectReceiver receiver(item.object, file.fd());
  channel.retrying(what, [&]() -> std::optional<std::string> {
    Request request = Request::get_object(bucket, item.object, receiver.received());
    request.sink = [&](const http::Response& response, const char* data, std::size_t size) {
      return receiver.receive(response, data, size);
    };
    const http::Response response = channel.send(request);
    receiver.flush_or_fail(what, file.temporary());
    fail_if_deleted_after_listing(response, what);
    if (auto cause = channel.sender().check(response, what, {200, 206})) return cause;
    return receiver.verdict();
  });
  file.commit();
}

}  // namespace tp::s3
