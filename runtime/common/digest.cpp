#include "common/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace tp {
namespace {

const EVP_MD* evp_for(HashAlgorithm algorithm) {
  switch (algorithm) {
    case HashAlgorithm::md5:
      return EVP_md5();
    case HashAlgorithm::sha1:
      return EVP_sha1();
    case HashAlgorithm::sha256:
      return EVP_sha256();
  }
  return nullptr;
}

}  // namespace

struct Hasher::Context {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> evp{EVP_MD_CTX_new(), EVP_MD_CTX_free};
};

Hasher::Hasher(HashAlgorithm algorithm) : context_(std::make_unique<Context>()) {
  if (!context_->evp || EVP_DigestInit_ex(context_->evp.get(), evp_for(algorithm), nullptr) != 1) {
    fail(ExitCode::internal, "OpenSSL cannot start a digest");
  }
}

Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

void Hasher::update(const void* data, std::size_t size) { EVP_DigestUpdate(context_->evp.get(), data, size); }

std::string Hasher::finish() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_->evp.get(), out, &length);
  return std::string(reinterpret_cast<char*>(out), length);
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 0xF];
  }
  return out;
}

std::string digest(HashAlgorithm algorithm, std::string_view data) {
  Hasher hasher(algorithm);
  hasher.update(data);
  return hasher.finish();
}

std::string sha256_hex(std::string_view data) { return hex(digest(HashAlgorithm::sha256, data)); }

std::string hmac(HashAlgorithm algorithm, std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(evp_for(algorithm), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &length);
  return std::string(reinterpret_cast<char*>(out), length);
}

std::string file_digest_hex(const std::filesystem::path& file, HashAlgorithm algorithm, ExitCode unreadable) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(unreadable, "cannot read {}: {}", file.string(), std::strerror(errno));
  Hasher hasher(algorithm);
  std::vector<char> buffer(1 << 20);
  ssize_t got = 0;
  while ((got = ::read(fd, buffer.data(), buffer.size())) > 0 || (got < 0 && errno == EINTR)) {
    if (got > 0) hasher.update(buffer.data(), static_cast<std::size_t>(got));
  }
  const int read_errno = errno;
  ::close(fd);
  if (got < 0) fail(unreadable, "cannot read {}: {}", file.string(), std::strerror(read_errno));
  return hex(hasher.finish());
}

}  // namespace tp
