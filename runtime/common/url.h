// URLs: as they may be shown (in logs, messages and written files), and their parts encoded.
#pragma once

#include <string>
#include <string_view>

namespace tp {

// The URL with any password replaced by "***" (scheme://user:***@host/...): git remotes, pip indexes.
std::string redacted_url(const std::string& url);

// RFC 3986 percent-encoding as S3's SigV4 and MLflow's REST API want it: everything but A-Z a-z 0-9 - _ . ~
// as %XX (upper case); '/' kept when `keep_slash` (a path whose segments are encoded).
std::string percent_encode(std::string_view text, bool keep_slash);

}  // namespace tp
