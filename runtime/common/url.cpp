#include "common/url.h"

#include <cctype>

namespace tp {

std::string redacted_url(const std::string& url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return url;
  const auto authority_start = scheme_end + 3;
  const auto path_start = url.find('/', authority_start);
  const auto at = url.rfind('@', path_start);
  if (at == std::string::npos || at < authority_start) return url;
  const auto colon = url.find(':', authority_start);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 0xF];
    }
  }
  return out;
}

}  // namespace tp
