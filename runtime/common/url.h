// URLs as they may be shown: in logs, messages and written files.
#pragma once

#include <string>

namespace tp {

// The URL with any password replaced by "***" (scheme://user:***@host/...): git remotes, pip indexes.
std::string redacted_url(const std::string& url);

}  // namespace tp
