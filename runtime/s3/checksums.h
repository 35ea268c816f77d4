// Checksums S3 uses: the x-amz-checksum-* algorithms (CRC64NVME, CRC32C, CRC32,
// SHA-1, SHA-256) that uploads send and downloads verify, and MD5 for ETags. CRC-64/NVME comes from ISA-L,
// CRC-32C from common's crc32c (crcutil combines CRCs), CRC32 from zlib, the digests from common/digest.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/base64.h"  // base64(), which the checksums S3 sends are written in
#include "common/digest.h"

namespace tp::s3 {

// The MD5 of a file's contents as 32 hex digits (a single-part ETag). Throws tp::Error (output) when it
// cannot be read.
std::string file_md5_hex(const std::filesystem::path& file);

// An incremental digest fed as bytes arrive; `finish` returns the raw digest.
class Digest {
 public:
  enum class Algorithm { md5, sha1, sha256, crc32, crc32c, crc64nvme };
  explicit Digest(Algorithm algorithm);
  ~Digest();
  Digest(Digest&&) noexcept;
  Digest& operator=(Digest&&) noexcept;
  void update(const void* data, std::size_t size);
  std::string finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// One piece of an object, as a CRC (raw, as Digest::finish returns it) of its size bytes.
struct CrcPiece {
  std::string crc;
  std::uint64_t size = 0;
};
// The CRC of the pieces one after another: S3's full-object checksum of a multipart upload from its parts',
// and a download's from its ranges'. For crc64nvme and crc32c; at least one piece.
std::string concatenate_crcs(Digest::Algorithm algorithm, const std::vector<CrcPiece>& pieces);

// An object's checksum as S3 reports it: the algorithm and the base64 of its value.
struct StoredChecksum {
  Digest::Algorithm algorithm;
  std::string value;
};

// The x-amz-checksum-* header names this client can verify, with their algorithm, cheapest first.
struct ChecksumHeader {
  const char* header;
  Digest::Algorithm algorithm;
};
inline constexpr ChecksumHeader kChecksumHeaders[] = {
    {"x-amz-checksum-crc64nvme", Digest::Algorithm::crc64nvme},
    {"x-amz-checksum-crc32c", Digest::Algorithm::crc32c},
    {"x-amz-checksum-crc32", Digest::Algorithm::crc32},
    {"x-amz-checksum-sha1", Digest::Algorithm::sha1},
    {"x-amz-checksum-sha256", Digest::Algorithm::sha256},
};

}  // namespace tp::s3
