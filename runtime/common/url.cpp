#include "common/url.h"

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

}  // namespace tp
