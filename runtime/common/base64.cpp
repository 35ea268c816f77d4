#include "common/base64.h"

#include <openssl/evp.h>

namespace tp {

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return {};
  std::string out(text.size() / 4 * 3, '\0');
  const int length =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (length < 0) return {};
  const std::size_t padding = text.size() - text.find_last_not_of('=') - 1;
  out.resize(static_cast<std::size_t>(length) - padding);
  return out;
}

}  // namespace tp
