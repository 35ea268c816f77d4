#include "s3/checksums.h"

#include <zlib.h>

#include <crcutil/generic_crc.h>
#include <isa-l/crc64.h>

#include <array>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/crc32c.h"
#include "common/error.h"

namespace tp::s3 {
namespace {

// S3's CRC checksums: CRC-64/NVME (x-amz-checksum-crc64nvme) computed by ISA-L's crc64_rocksoft_refl (the
// same CRC under the name of the T10 protection information model; carry-less multiplication, 4.6 times
// crcutil's tables here: bench/s3/checksum_speed) and CRC-32C (x-amz-checksum-crc32c) by common's crc32c,
// which uses the CPU's crc32 instruction. Both start from 0 for the CRC of nothing and continue from a CRC
// so far. Google's crcutil tables below only combine CRCs (ISA-L has no combination): crcutil takes the
// polynomials reflected; "canonical" means initial and final values of all ones, the same convention.
using CrcTable = crcutil::GenericCrc<crcutil::uint64, crcutil::uint64, crcutil::uint64, 4>;
const CrcTable& crc64nvme_table() {
  static const CrcTable table(0x9A6C9329AC4BC9B5ull, 64, true);  // 0xAD93D23594C93659 reflected
  return table;
}
const CrcTable& crc32c_table() {
  static const CrcTable table(0x82F63B78ull, 32, true);  // 0x1EDC6F41 reflected
  return table;
}

std::uint64_t from_big_endian(std::string_view bytes) {
  std::uint64_t value = 0;
  for (unsigned char byte : bytes) value = (value << 8) | byte;
  return value;
}

std::string big_endian64(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 7; i >= 0; --i, value >>= 8) bytes[static_cast<std::size_t>(i)] = static_cast<char>(value);
  return bytes;
}

std::string big_endian(std::uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16), static_cast<char>(value >> 8),
          static_cast<char>(value)};
}

}  // namespace

struct Digest::State {
  Algorithm algorithm;
  std::optional<Hasher> hasher;  // md5, sha1, sha256
  std::uint64_t crc = 0;
};

Digest::Digest(Algorithm algorithm) : state_(std::make_unique<State>()) {
  state_->algorithm = algorithm;
  if (algorithm == Algorithm::md5) state_->hasher.emplace(HashAlgorithm::md5);
  if (algorithm == Algorithm::sha1) state_->hasher.emplace(HashAlgorithm::sha1);
  if (algorithm == Algorithm::sha256) state_->hasher.emplace(HashAlgorithm::sha256);
}

Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;

void Digest::update(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  switch (state_->algorithm) {
    case Algorithm::crc32:
      while (size > 0) {  // zlib takes a uInt length
        const uInt chunk = static_cast<uInt>(std::min<std::size_t>(size, 1u << 30));
        state_->crc = ::crc32(static_cast<uLong>(state_->crc), bytes, chunk);
        bytes += chunk;
        size -= chunk;
      }
      break;
    case Algorithm::crc32c:
      state_->crc = tp::crc32c(std::string_view(reinterpret_cast<const char*>(bytes), size),
                               static_cast<std::uint32_t>(state_->crc));
      break;
    case Algorithm::crc64nvme:
      state_->crc = crc64_rocksoft_refl(state_->crc, bytes, size);
      break;
    default:
      state_->hasher->update(bytes, size);
  }
}

std::string Digest::finish() {
  switch (state_->algorithm) {
    case Algorithm::crc32:
    case Algorithm::crc32c:
      return big_endian(static_cast<std::uint32_t>(state_->crc));
    case Algorithm::crc64nvme:
      return big_endian64(state_->crc);
    default:
      return state_->hasher->finish();
  }
}

std::string concatenate_crcs(Digest::Algorithm algorithm, const std::vector<CrcPiece>& pieces) {
  const CrcTable& table = algorithm == Digest::Algorithm::crc64nvme ? crc64nvme_table() : crc32c_table();
  std::uint64_t combined = from_big_endian(pieces.at(0).crc);
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    combined = table.Base().Concatenate(combined, from_big_endian(pieces[i].crc), pieces[i].size);
  }
  return algorithm == Digest::Algorithm::crc64nvme ? big_endian64(combined)
                                                   : big_endian(static_cast<std::uint32_t>(combined));
}

std::string file_md5_hex(const std::filesystem::path& file) {
  return file_digest_hex(file, HashAlgorithm::md5, ExitCode::output);
}

}  // namespace tp::s3
