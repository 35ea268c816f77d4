#include "s3/http.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <stdexcept>

namespace tp::s3 {
namespace {

constexpr std::size_t kMaxKeptBody = 1 << 20;  // error and listing bodies; larger ones are cut

struct Exchange {
  CURL* curl;
  const HttpRequest* request;
  HttpResponse* response;
  const std::atomic<bool>* cancel;
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
    const auto begin = value.find_first_not_of(" \t");
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
    if (!exchange->request->sink(*exchange->response, data, bytes)) return 0;  // CURLE_WRITE_ERROR
    exchange->response->sink_bytes += bytes;
    return bytes;
  }
  auto& body = exchange->response->body;
  body.append(data, std::min(bytes, kMaxKeptBody - std::min(kMaxKeptBody, body.size())));
  return bytes;
}

std::size_t on_upload(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto* exchange = static_cast<Exchange*>(user);
  return exchange->request->body(buffer, size * count);
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* exchange = static_cast<Exchange*>(user);
  return exchange->cancel != nullptr && exchange->cancel->load() ? 1 : 0;
}

}  // namespace

const std::string& HttpResponse::header(const std::string& lower_name) const {
  static const std::string empty;
  const auto found = headers.find(lower_name);
  return found == headers.end() ? empty : found->second;
}

HttpHandle::HttpHandle(const HttpSettings& settings) : settings_(settings) {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
  if (curl_ == nullptr) throw std::runtime_error("curl_easy_init failed");
}

HttpHandle::~HttpHandle() {
  curl_easy_cleanup(curl_);
}

HttpResponse HttpHandle::perform(const HttpRequest& request, const std::atomic<bool>* cancel) {
  HttpResponse response;
  Exchange exchange{curl_, &request, &response, cancel};
  char error_buffer[CURL_ERROR_SIZE] = {0};

  // Reset per-request options but keep the connection cache of this handle.
  curl_easy_reset(curl_);
  curl_easy_setopt(curl_, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl_, CURLOPT_PATH_AS_IS, 1L);  // keys may hold "./" or "//": never normalise them away
  curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT, static_cast<long>(settings_.connect_timeout.count()));
  curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, static_cast<long>(settings_.stall_timeout.count()));
  curl_easy_setopt(curl_, CURLOPT_BUFFERSIZE, settings_.receive_buffer_bytes);
  curl_easy_setopt(curl_, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!settings_.ca_bundle.empty()) curl_easy_setopt(curl_, CURLOPT_CAINFO, settings_.ca_bundle.c_str());
  curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &exchange);
  curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &exchange);
  curl_easy_setopt(curl_, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl_, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl_, CURLOPT_XFERINFODATA, &exchange);

  if (request.method == "HEAD") {
    curl_easy_setopt(curl_, CURLOPT_NOBODY, 1L);
  } else if (request.method == "PUT" || request.method == "POST") {
    if (request.method == "PUT") {
      curl_easy_setopt(curl_, CURLOPT_UPLOAD, 1L);
    } else {
      curl_easy_setopt(curl_, CURLOPT_POST, 1L);
    }
    curl_easy_setopt(curl_, CURLOPT_READFUNCTION, on_upload);
    curl_easy_setopt(curl_, CURLOPT_READDATA, &exchange);
    if (request.method == "PUT") {
      curl_easy_setopt(curl_, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body_size));
    } else {
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body_size));
    }
  } else if (request.method != "GET") {
    curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  curl_slist* header_list = nullptr;
  for (const auto& [name, value] : request.headers) {
    header_list = curl_slist_append(header_list, (name + ": " + value).c_str());
  }
  header_list = curl_slist_append(header_list, "Expect:");  // no 100-continue round trip
  header_list = curl_slist_append(header_list, "Accept:");
  if (request.method == "POST") header_list = curl_slist_append(header_list, "Content-Type:");
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, header_list);

  response.curl_code = curl_easy_perform(curl_);
  curl_slist_free_all(header_list);
  curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &response.status);
  if (response.curl_code != CURLE_OK) {
    response.curl_error = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(response.curl_code);
  }
  return response;
}

}  // namespace tp::s3
