#include "s3/ranged_download.h"

#include <sys/stat.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/error.h"

namespace tp::s3 {
namespace {

// The listed version's whole-object CRC from a HEAD (CRC64NVME or CRC32C), the checksums that ranges can be
// combined into; none when it has another or none.
std::optional<StoredChecksum> combinable_checksum(const Channel& channel, const std::string& bucket,
                                                  const ObjectInfo& object) {
  const std::string what = channel.sender().describe("HEAD", bucket, object.key);
  std::optional<StoredChecksum> checksum;
  channel.retrying(what, [&]() -> std::optional<std::string> {
    const http::Response response = channel.send(Request::head_listed_object(bucket, object));
    if (response.transport == http::Transport::ok && (response.status == 404 || response.status == 412)) {
      fail(ExitCode::network, "{}: the object changed or was deleted after it was listed (HTTP {})", what,
           response.status);
    }
    if (auto cause = channel.sender().check(response, what, {200})) return cause;
    checksum = sent_checksum(response);
    if (checksum && checksum->algorithm != Digest::Algorithm::crc64nvme &&
        checksum->algorithm != Digest::Algorithm::crc32c) {
      checksum.reset();
    }
    return std::nullopt;
  });
  return checksum;
}

}  // namespace

RangedDownload::RangedDownload(const Channel& channel, const std::string& bucket, const DownloadItem& item)
    : bucket_(bucket),
      item_(item),
      checksum_(combinable_checksum(channel, bucket, item.object)),
      file_(item.target) {
  const TransferSettings& settings = channel.sender().settings();
  const std::uint64_t size = item.object.size;
  const auto connections = static_cast<std::uint64_t>(settings.parallelism);
  range_size_ =
      checksum_ ? std::max(settings.part_size, (size + connections - 1) / connections) : settings.part_size;
  const auto ranges = static_cast<std::size_t>((size + range_size_ - 1) / range_size_);
  range_crcs_.resize(ranges);
  range_done_.resize(ranges);
}

RangedDownload::Range RangedDownload::range(std::size_t index) const {
  const std::uint64_t begin = index * range_size_;
  return {begin, std::min(item_.object.size, begin + range_size_) - 1};
}

bool RangedDownload::download(const Channel& channel, std::size_t index) {
  {
    std::lock_guard<std::mutex> lock(open_mutex_);
    if (!file_.is_open()) file_.open();
  }
  std::optional<Digest> crc;
  if (checksum_) crc.emplace(checksum_->algorithm);
  download_range(channel, range(index), crc ? &*crc : nullptr);
  if (!hash_in_order(index, crc)) return false;
  verify_and_commit(channel);
  return true;
}

void RangedDownload::download_range(const Channel& channel, const Range& range, Digest* crc) {
  const std::string what = fmt::format(
      "{} bytes {}-{}", channel.sender().describe("GET", bucket_, item_.object.key), range.begin, range.end);
  std::uint64_t position = range.begin;
  GatheringWriter writer(file_.fd(), range.size());
  channel.retrying(what, [&]() -> std::optional<std::string> {
    Request request = Request::get_range(bucket_, item_.object, position, range.end);
    bool whole_object_sent = false;
    request.sink = [&](const http::Response& response, const char* data, std::size_t size) {
      if (response.status != 206) {
        whole_object_sent = true;
        return false;
      }
      if (!writer.write(data, size, position)) return false;
      if (crc) crc->update(data, size);
      position += size;
      return true;
    };
    const http::Response response = channel.send(request);
    writer.flush_or_fail(what, file_.temporary());
    if (whole_object_sent) fail(ExitCode::network, "{}: the server ignored the Range header", what);
    fail_if_deleted_after_listing(response, what);
    if (auto cause = channel.sender().check(response, what, {206})) return cause;
    if (position != range.end + 1) return fmt::format("body cut short at byte {}", position);
    return std::nullopt;
  });
}

bool RangedDownload::hash_in_order(std::size_t index, std::optional<Digest>& crc) {
  const bool hash_md5 = !checksum_ && etag_is_md5(item_.object.etag);
  std::unique_lock<std::mutex> lock(hash_mutex_);
  if (crc) range_crcs_[index] = {crc->finish(), range(index).size()};
  range_done_[index] = 1;
  if (hashing_) return false;  // the thread that is hashing will take this range too
  hashing_ = true;
  while (next_range_to_hash_ < range_done_.size() && range_done_[next_range_to_hash_]) {
    const Range next = range(next_range_to_hash_);
    lock.unlock();
    if (hash_md5) hash_file_range(file_.temporary(), file_.fd(), next.begin, next.size(), {&md5_});
    lock.lock();
    ++next_range_to_hash_;
  }
  hashing_ = false;
  return next_range_to_hash_ == range_done_.size();
}

void RangedDownload::verify_and_commit(const Channel& channel) {
  const ObjectInfo& object = item_.object;
  const std::string what = channel.sender().describe("GET", bucket_, object.key);
  struct stat status{};
  if (::fstat(file_.fd(), &status) != 0 || static_cast<std::uint64_t>(status.st_size) != object.size)
    fail(ExitCode::network, "{}: downloaded file has the wrong size", what);
  const std::string digest = checksum_ ? concatenate_crcs(checksum_->algorithm, range_crcs_) : md5_.finish();
  if (auto mismatch = digest_mismatch(object, checksum_, digest, " of the downloaded ranges")) {
    spdlog::warn("s3: {}: {}; fetching it whole", what, *mismatch);
    file_.discard();
    download_whole(channel, bucket_, item_);
    return;
  }
  file_.commit();
}

}  // namespace tp::s3
