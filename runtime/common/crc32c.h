// CRC32C (Castagnoli), from Google's crcutil (Debian's libcrcutil-dev): the CPU's crc32 instruction where there
// is one, else crcutil's portable table. The checksum of TensorBoard's TFRecord framing, of packed shards
// (docs/s3.md, "Packed shards") and S3's x-amz-checksum-crc32c.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tp {

// CRC32C of `data`: crc32c("123456789") is 0xE3069283. `previous` continues a CRC over bytes that came
// before: crc32c(b, crc32c(a)) == crc32c(a + b).
std::uint32_t crc32c(std::string_view data, std::uint32_t previous = 0);

}  // namespace tp
