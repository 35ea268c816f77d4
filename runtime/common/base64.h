// Base64 (RFC 4648, with padding), for bytes embedded in text: the report's data: URIs.
#pragma once

#include <string>
#include <string_view>

namespace tp {

std::string base64(std::string_view bytes);

}  // namespace tp
