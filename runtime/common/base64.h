// Base64 (RFC 4648, with padding), for bytes embedded in text: the report's data: URIs, S3's checksums, SSH
// keys and hashed host names in known_hosts.
#pragma once

#include <string>
#include <string_view>

namespace tp {

std::string base64(std::string_view bytes);
// The bytes of padded base64 text; empty when the text is not base64.
std::string base64_decode(std::string_view text);

}  // namespace tp
