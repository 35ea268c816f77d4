// Hashes and checksums S3 uses: SHA-256 and HMAC for SigV4, MD5 for ETags and Content-MD5, and the
// x-amz-checksum-* algorithms (CRC32, CRC32C, SHA-1, SHA-256) for verifying downloads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace tp::s3 {

std::string hex(std::string_view bytes);
std::string base64(std::string_view bytes);
std::string sha256(std::string_view data);  // raw 32 bytes
std::string sha256_hex(std::string_view data);
std::string hmac_sha256(std::string_view key, std::string_view data);  // raw 32 bytes
std::string md5(std::string_view data);                                // raw 16 bytes
// The MD5 of a file's contents as 32 hex digits (a single-part ETag). Throws tp::Error (output) when it
// cannot be read.
std::string file_md5_hex(const std::filesystem::path& file);

// An incremental digest fed as bytes arrive; `finish` returns the raw digest.
class Digest {
 public:
  enum class Algorithm { md5, sha1, sha256, crc32, crc32c };
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

// The x-amz-checksum-* header names this client can verify, with their algorithm.
struct ChecksumHeader {
  const char* header;
  Digest::Algorithm algorithm;
};
inline constexpr ChecksumHeader kChecksumHeaders[] = {
    {"x-amz-checksum-sha256", Digest::Algorithm::sha256},
    {"x-amz-checksum-sha1", Digest::Algorithm::sha1},
    {"x-amz-checksum-crc32", Digest::Algorithm::crc32},
    {"x-amz-checksum-crc32c", Digest::Algorithm::crc32c},
};

}  // namespace tp::s3
