// One libcurl easy handle: a kept-alive connection that performs one HTTP exchange at a time.
// Response bodies of successful requests stream to a sink; error bodies are kept (capped) for their XML.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "s3/sigv4.h"

namespace tp::s3 {

struct HttpSettings {
  std::string ca_bundle;  // empty: the system's trust store
  std::chrono::seconds connect_timeout{10};
  // A transfer that moves no byte for this long is abandoned (and retried): a stalled server or proxy.
  std::chrono::seconds stall_timeout{30};
  long receive_buffer_bytes = 128 * 1024;  // libcurl's buffer per transfer: the per-transfer memory bound
};

struct HttpResponse;
// Receives body bytes of a 2xx response (status and headers already known); returns false to abort the
// transfer (the caller keeps its own error).
using BodySink = std::function<bool(const HttpResponse& response, const char* data, std::size_t size)>;
// Fills `buffer` with up to `size` upload bytes; returns how many, or CURL_READFUNC_ABORT.
using BodySource = std::function<std::size_t(char* buffer, std::size_t size)>;

struct HttpRequest {
  std::string method;
  std::string url;
  HeaderList headers;
  BodySource body;  // for PUT/POST; with `body_size`
  std::uint64_t body_size = 0;
  BodySink sink;  // where a 2xx body goes; empty: kept in HttpResponse::body
};

struct HttpResponse {
  CURLcode curl_code = CURLE_OK;
  std::string curl_error;
  long status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // error bodies and sink-less 2xx bodies (capped)
  std::uint64_t sink_bytes = 0;                // bytes handed to the sink

  const std::string& header(const std::string& lower_name) const;
};

class HttpHandle {
 public:
  explicit HttpHandle(const HttpSettings& settings);
  ~HttpHandle();
  HttpHandle(const HttpHandle&) = delete;
  HttpHandle& operator=(const HttpHandle&) = delete;

  // Performs one exchange; transport failures are reported in the response, not thrown.
  // `cancel`, when set by another thread, aborts the transfer early.
  HttpResponse perform(const HttpRequest& request, const std::atomic<bool>* cancel = nullptr);

 private:
  CURL* curl_;
  HttpSettings settings_;
};

}  // namespace tp::s3
