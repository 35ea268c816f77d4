#include "common/crc32c.h"

// The header defines the crc32 instruction's intrinsics for its inline code, which this file does not use;
// its inline-assembly form compiles without -msse4.2 (the library itself checks the CPU at run time).
#define CRCUTIL_FORCE_ASM_CRC32C 1
#include <crc32c_sse4.h>
#include <generic_crc.h>

namespace tp {

std::uint32_t crc32c(std::string_view data, std::uint32_t previous) {
  // Castagnoli's polynomial (reflected), "canonical": the CRC inverted before and after, as CRC32C is stated.
  // crcutil's tables are built once, on first use. The CPU's crc32 instruction (SSE4.2) is about ten times
  // faster than the portable table, which is what packing and verifying shards spend their time on.
#if HAVE_AMD64 || HAVE_I386
  static const bool has_crc32_instruction = crcutil::Crc32cSSE4::IsSSE42Available();
  if (has_crc32_instruction) {
    static const crcutil::Crc32cSSE4 castagnoli_sse4(true);
    return static_cast<std::uint32_t>(castagnoli_sse4.CrcDefault(data.data(), data.size(), previous));
  }
#endif
  static const crcutil::GenericCrc<std::uint64_t, std::uint64_t, std::uint64_t, 4> castagnoli(0x82f63b78, 32, true);
  return static_cast<std::uint32_t>(castagnoli.CrcDefault(data.data(), data.size(), previous));
}

}  // namespace tp
