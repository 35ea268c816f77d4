// Files stored in S3 with a CRC64NVME checksum: PutObject for a file up to the threshold, and above it a
// multipart upload, as aws-c-s3's auto-ranged PUT: created, its parts put in parallel, completed with a
// full-object CRC64NVME combined from the parts', and aborted when the upload fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "s3/checksums.h"
#include "s3/object.h"
#include "s3/sender.h"
#include "s3/xml.h"

namespace tp::s3 {

struct UploadItem {
  std::filesystem::path source;
  std::string key;
};

// PUTs the first `size` bytes of item.source as the object item.key (PutObject) with their CRC64NVME
// (x-amz-checksum-crc64nvme); a checksum the server answers with must be the one sent. Returns the ETag.
std::string put_object(const Channel& channel, const std::string& bucket, const UploadItem& item,
                       std::uint64_t size);

class MultipartUpload {
 public:
  // Plans parts of `part_size` bytes, or larger where S3's 10,000 parts would not hold `size` bytes.
  MultipartUpload(const UploadItem& item, std::uint64_t size, std::uint64_t part_size);

  const UploadItem& item() const { return item_; }
  std::size_t part_count() const { return parts_.size(); }
  std::uint64_t part_size(std::size_t index) const;

  // CreateMultipartUpload.
  void create(const Channel& channel, const std::string& bucket);
  // UploadPart of part `index`, as put_object sends a whole object; several parts may be put at once.
  void put_part(const Channel& channel, const std::string& bucket, std::size_t index);
  // CompleteMultipartUpload, once every part is in; returns what S3 stored.
  ObjectInfo complete(const Channel& channel, const std::string& bucket);
  // AbortMultipartUpload, best effort: a failure is a warning (S3's lifecycle rules clean up the rest).
  void abort(const Channel& channel, const std::string& bucket);

 private:
  const UploadItem& item_;
  std::uint64_t size_;
  std::uint64_t part_size_;
  std::string upload_id_;
  std::vector<xml::CompletedPart> parts_;
  std::vector<CrcPiece> part_crcs_;  // each part's CRC64NVME
};

}  // namespace tp::s3
