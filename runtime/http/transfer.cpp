#include "http/transfer.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/error.h"

namespace tp::http {
namespace {

constexpr std::size_t kMaxKeptBody = 1 << 20;  // error and listing bodies; larger ones are cut

struct Exchange {
  CURL* curl;
  const Request* request;
  Response* response;
  const std::atomic<bool>* cancel;
  std::uint64_t upload_offset = 0;
  bool sink_refused = false;
  bool source_failed = false;
};

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    exchange->response->headers.clear();  // a new response (after 100 Continue or a redirect)
    return size * count;
  }
  const auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = line.substr(colon + 1);
    const auto begin = value.find_first_not_of(" \t\r\n");  // an empty value is all whitespace
    const auto end = value.find_last_not_of(" \t\r\n");
    exchange->response->headers[name] =
        begin == std::string::npos ? "" : value.substr(begin, end - begin + 1);
  }
  return size * count;
}

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const std::size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(exchange->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 200 && status < 300 && exchange->request->sink) {
    exchange->response->status = status;
    if (!exchange->request->sink(*exchange->response, data, bytes)) {
      exchange->sink_refused = true;
      return 0;  // CURLE_WRITE_ERROR
    }
    exchange->response->sink_bytes += bytes;
    return bytes;
  }
  auto& body = exchange->response->body;
  body.append(data, std::min(bytes, kMaxKeptBody - std::min(kMaxKeptBody, body.size())));
  return bytes;
}

std::size_t on_upload(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  const Request& request = *exchange->request;
  const std::uint64_t left = request.body_size - std::min(request.body_size, exchange->upload_offset);
  if (!request.body || left == 0) return 0;
  const std::optional<std::size_t> got = request.body(
      buffer, static_cast<std::size_t>(std::min<std::uint64_t>(size * count, left)), exchange->upload_offset);
  if (!got) {
    exchange->source_failed = true;
    return CURL_READFUNC_ABORT;
  }
  exchange->upload_offset += *got;
  return *got;
}

int on_seek(void* user, curl_off_t offset, int origin) {
  auto* exchange = static_cast<Exchange*>(user);
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  exchange->upload_offset = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* exchange = static_cast<Exchange*>(user);
  return exchange->cancel != nullptr && exchange->cancel->load() ? 1 : 0;
}

Transport classify(CURLcode code, const Exchange& exchange) {
  switch (code) {
    case CURLE_OK:
      return Transport::ok;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
      return Transport::untrusted;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
      return Transport::bad_url;
    case CURLE_WRITE_ERROR:
      return exchange.sink_refused ? Transport::sink_refused : Transport::transient;
    case CURLE_ABORTED_BY_CALLBACK:
      return exchange.source_failed ? Transport::source_failed : Transport::cancelled;
    case CURLE_READ_ERROR:
      return exchange.source_failed ? Transport::source_failed : Transport::transient;
    default:
      return Transport::transient;
  }
}

}  // namespace

BodySource text_body(std::string text) {
  auto shared = std::make_shared<const std::string>(std::move(text));
  return [shared](char* buffer, std::size_t size, std::uint64_t offset) -> std::optional<std::size_t> {
    if (offset >= shared->size()) return 0;
    const std::size_t n = std::min<std::size_t>(size, shared->size() - offset);
    std::memcpy(buffer, shared->data() + offset, n);
    return n;
  };
}

const std::string& Response::header(const std::string& lower_name) const {
  static const std::string empty;
  const auto found = headers.find(lower_name);
  return found == headers.end() ? empty : found->second;
}

bool transient_status(long status) {
  return status == 429 || status >= 500;
}

Handle::Handle(Settings settings) : settings_(std::move(settings)) {
  // Once per process, before the first handle; libcurl's own reference count makes a second call (from a
  // module that does not use this one) harmless.
  static const CURLcode initialized = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (initialized != CURLE_OK) {
    fail(ExitCode::internal, "cannot initialize libcurl: {}", curl_easy_strerror(initialized));
  }
  curl_ = curl_easy_init();
  if (curl_ == nullptr) fail(ExitCode::internal, "cannot initialize libcurl: curl_easy_init failed");
}

Handle::~Handle() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Response Handle::perform(const Request& request, const std::atomic<bool>* cancel) {
  CURL* curl = static_cast<CURL*>(curl_);
  Response response;
  Exchange exchange{curl, &request, &response, cancel};
  char error_buffer[CURL_ERROR_SIZE] = {0};

  // Reset per-request options but keep the connection cache of this handle.
  curl_easy_reset(curl);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);  // S3 keys may hold "./" or "//": never normalise them away
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(settings_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(settings_.stall_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, settings_.receive_buffer_bytes);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!settings_.ca_bundle.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, settings_.ca_bundle.c_str());
  if (!settings_.ca_pem.empty()) {
    curl_blob blob{const_cast<char*>(settings_.ca_pem.data()), settings_.ca_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &blob);
  }
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &exchange);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &exchange);
  if (request.follow_redirects) curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  if (request.basic_auth) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, request.basic_auth->first.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, request.basic_auth->second.c_str());
  }

  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST" || request.body) {
    if (request.method == "PUT") {
      curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body_size));
    } else {
      // POST's way of sending a body, under the request's own method for the others (PATCH, DELETE)
      curl_easy_setopt(curl, CURLOPT_POST, 1L);
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body_size));
      if (request.method != "POST") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    }
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_upload);
    curl_easy_setopt(curl, CURLOPT_READDATA, &exchange);
    curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(curl, CURLOPT_SEEKDATA, &exchange);
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  curl_slist* header_list = nullptr;
  for (const auto& [name, value] : request.headers) {
    header_list = curl_slist_append(header_list, (name + ": " + value).c_str());
  }
  header_list = curl_slist_append(header_list, "Expect:");  // no 100-continue round trip
  header_list = curl_slist_append(header_list, "Accept:");
  // POST's mechanics add a form Content-Type; a request sends its own or none (PUT's add none).
  const bool sent_as_post = request.method == "POST" || (request.body && request.method != "PUT");
  if (sent_as_post) header_list = curl_slist_append(header_list, "Content-Type:");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, header_list);

  const CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(header_list);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  response.transport = classify(code, exchange);
  if (code != CURLE_OK) {
    response.transport_error =
        fmt::format("{} (curl error {})", error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code),
                    static_cast<int>(code));
  }
  return response;
}

}  // namespace tp::http
