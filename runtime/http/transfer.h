// HTTP on libcurl for s3, git's LFS and telemetry's progress posts: one easy handle (a kept-alive
// connection) that performs one exchange at a time. libcurl's global initialisation happens once, here.
// Bodies of 2xx answers stream to a sink; other bodies are kept (capped) for their error text. Transport
// failures are classified, not thrown: the caller decides the exit class and whether to retry (common/retry.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tp::http {

struct Settings {
  std::string ca_bundle;  // empty: the system's trust store
  std::string ca_pem;     // trusted certificates as PEM text (a kubeconfig's certificate-authority-data); wins
  std::chrono::seconds connect_timeout{10};
  // A transfer that moves no byte for this long is abandoned (Transport::transient): a stalled server or
  // proxy.
  std::chrono::seconds stall_timeout{30};
  long receive_buffer_bytes = 128 * 1024;  // libcurl's buffer per transfer: the per-transfer memory bound
};

struct Response;
// Receives body bytes of a 2xx answer (status and headers already known); returns false to abort the
// transfer (Transport::sink_refused; the caller keeps its own reason).
using BodySink = std::function<bool(const Response& response, const char* data, std::size_t size)>;
// Copies up to `size` upload bytes from `offset` into `buffer`; returns how many, or nullopt when they
// cannot be read (Transport::source_failed). Reads by offset, so libcurl may rewind (a redirect) and
// each attempt of a retried request reads from the start.
using BodySource =
    std::function<std::optional<std::size_t>(char* buffer, std::size_t size, std::uint64_t offset)>;

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method = "GET";
  std::string url;  // used as is: "./" and "//" in the path are not normalised away
  Headers headers;  // libcurl's default Accept and Expect are not sent; POST has no default Content-Type
  BodySource body;  // for PUT, POST, PATCH and DELETE, with `body_size`; empty: no body
  std::uint64_t body_size = 0;
  BodySink sink;  // where a 2xx body goes; empty: kept in Response::body
  bool follow_redirects = false;
  // HTTP basic authentication; never sent to another host after a redirect.
  std::optional<std::pair<std::string, std::string>> basic_auth;  // user, password
};

// A request body of `text` (copied).
BodySource text_body(std::string text);

enum class Transport {
  ok,             // an HTTP answer came, whatever its status
  transient,      // no answer or a cut one: refused, reset, timed out, stalled, truncated; worth a retry
  untrusted,      // TLS: the server's certificate is not trusted, or the CA bundle or client certificate is
                  // unusable
  bad_url,        // a malformed URL or an unsupported scheme
  cancelled,      // the `cancel` flag was set
  sink_refused,   // the body sink returned false
  source_failed,  // the body source could not read
};

struct Response {
  Transport transport = Transport::ok;
  std::string transport_error;  // libcurl's message and code, when transport is not ok
  long status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;                            // error bodies and sink-less 2xx bodies (capped at 1 MiB)
  std::uint64_t sink_bytes = 0;                // bytes handed to the sink

  const std::string& header(const std::string& lower_name) const;
};

// 429 and 5xx: the server asks to be asked again later. Every other status is the answer.
bool transient_status(long status);

class Handle {
 public:
  explicit Handle(Settings settings);
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // Performs one exchange; transport failures are reported in the response, not thrown.
  // `cancel`, when set by another thread, aborts the transfer early.
  Response perform(const Request& request, const std::atomic<bool>* cancel = nullptr);

 private:
  void* curl_;  // CURL*: libcurl stays out of this header
  Settings settings_;
};

}  // namespace tp::http
