// Plain HTTP GET for tests that read a server's answer (libcurl).
#pragma once

#include <string>

namespace tp::testing {

struct HttpResponse {
  bool reached = false;  // a response came back at all
  long status = 0;
  std::string body;
  std::string content_type;
};

// GET `url`, with a 20 s timeout.
HttpResponse http_get(const std::string& url);

}  // namespace tp::testing
