// A large object fetched as byte ranges in parallel into one temporary file, as aws-c-s3's auto-ranged GET
// does. A HEAD of the listed version plans it: with a CRC that ranges can be combined into (CRC64NVME,
// CRC32C), each range's CRC is taken as it streams in and the ranges' CRCs are combined at the end; without
// one, the MD5 of a single-part ETag is taken over the ranges in object order as they land, by one thread at
// a time, so that it overlaps the download instead of re-reading the file. Once every range is in, the file
// is verified and committed as a whole-object download is (s3/object_download.h); on a mismatch (a range was
// corrupted in transit, and no range can be checked alone) the object is fetched again in one piece, with
// its own retries and check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "s3/checksums.h"
#include "s3/object_download.h"
#include "s3/sender.h"

namespace tp::s3 {

class RangedDownload {
 public:
  // HEADs the object and plans its ranges. With a CRC, one range per connection: fewer, longer GETs were
  // faster against a loaded MinIO than many short ones (docs/benchmarks.md). An MD5 is taken in order as
  // ranges land, so there ranges stay part-size and land one after another while the rest download.
  RangedDownload(const Channel& channel, const std::string& bucket, const DownloadItem& item);

  const DownloadItem& item() const { return item_; }
  std::size_t range_count() const { return range_done_.size(); }
  // Downloads range `index`; the ranges of one object may download at once on several threads. Returns
  // whether this range was the object's last: then the object is verified and in place.
  bool download(const Channel& channel, std::size_t index);

 private:
  struct Range {
    std::uint64_t begin;
    std::uint64_t end;  // inclusive
    std::uint64_t size() const { return end + 1 - begin; }
  };
  Range range(std::size_t index) const;
  // Bytes of the range into the file at the same offset; `crc`, when given, takes them in order.
  void download_range(const Channel& channel, const Range& range, Digest* crc);
  // Records range `index` as in and hashes, unless another thread is at it, the ranges that are in, in
  // order. True for the one caller that finds every range in and hashed.
  bool hash_in_order(std::size_t index, std::optional<Digest>& crc);
  // Checks the size and the digest, then commits the file, or fetches the object whole on a mismatch.
  void verify_and_commit(const Channel& channel);

  const std::string bucket_;
  const DownloadItem& item_;
  const std::optional<StoredChecksum> checksum_;  // combinable; none: the MD5 of a single-part ETag, if any
  std::uint64_t range_size_ = 0;
  std::mutex open_mutex_;
  DownloadFile file_;  // opened by the first range to start

  std::mutex hash_mutex_;  // guards what follows
  std::vector<CrcPiece> range_crcs_;
  std::vector<char> range_done_;
  std::size_t next_range_to_hash_ = 0;
  bool hashing_ = false;
  Digest md5_{Digest::Algorithm::md5};
};

}  // namespace tp::s3
