#include "common/crc32c.h"

#include <generic_crc.h>

namespace tp {

std::uint32_t crc32c(std::string_view data, std::uint32_t previous) {
  // Castagnoli's polynomial (reflected), "canonical": the CRC inverted before and after, as CRC32C is stated.
  // Its tables are built once, on first use.
  static const crcutil::GenericCrc<std::uint64_t, std::uint64_t, std::uint64_t, 4> castagnoli(0x82f63b78, 32, true);
  return static_cast<std::uint32_t>(castagnoli.CrcDefault(data.data(), data.size(), previous));
}

}  // namespace tp
