// Cryptographic digests and HMACs, the one place trainpoint computes them (OpenSSL): SHA-256 for names, cache
// keys, Git LFS objects and SigV4, MD5 for S3's ETags, SHA-1 and SHA-256 for S3's checksums, HMAC for SigV4
// and known_hosts' hashed names. S3's CRCs are in
// s3/checksums.h, built on this.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"

namespace tp {

enum class HashAlgorithm { md5, sha1, sha256 };

// A digest fed as bytes arrive; finish() returns it raw (16, 20 or 32 bytes) and may be called once.
class Hasher {
 public:
  explicit Hasher(HashAlgorithm algorithm);
  ~Hasher();
  Hasher(Hasher&&) noexcept;
  Hasher& operator=(Hasher&&) noexcept;
  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  std::string finish();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// Lower-case hex of raw bytes.
std::string hex(std::string_view bytes);
std::string digest(HashAlgorithm algorithm, std::string_view data);  // raw
std::string sha256_hex(std::string_view data);
std::string hmac(HashAlgorithm algorithm, std::string_view key, std::string_view data);  // raw
// The hex digest of a file's contents. Throws tp::Error of class `unreadable` when it cannot be read.
std::string file_digest_hex(const std::filesystem::path& file, HashAlgorithm algorithm, ExitCode unreadable);

}  // namespace tp
