#include "common/base64.h"

#include <cstdint>

namespace tp {

std::string base64(std::string_view bytes) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve(4 * ((bytes.size() + 2) / 3));
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t left = bytes.size() - i;
    std::uint32_t group = static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (left > 1) group |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (left > 2) group |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 2]));
    out += kDigits[(group >> 18) & 0x3F];
    out += kDigits[(group >> 12) & 0x3F];
    out += left > 1 ? kDigits[(group >> 6) & 0x3F] : '=';
    out += left > 2 ? kDigits[group & 0x3F] : '=';
  }
  return out;
}

}  // namespace tp
