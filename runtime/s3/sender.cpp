#include "s3/sender.h"

#include <algorithm>
#include <ctime>
#include <set>

#include <fmt/format.h>

#include "common/error.h"
#include "common/tasks.h"
#include "common/url.h"
#include "s3/xml.h"

namespace tp::s3 {
namespace {

std::string host_of(const std::string& endpoint) {
  const auto start = endpoint.find("://") + 3;
  const auto end = endpoint.find('/', start);
  std::string host = endpoint.substr(start, end == std::string::npos ? std::string::npos : end - start);
  // The Host header (and the signature) omit the scheme's default port.
  const bool https = endpoint.rfind("https://", 0) == 0;
  const std::string default_port = https ? ":443" : ":80";
  if (host.size() > default_port.size() &&
      host.compare(host.size() - default_port.size(), default_port.size(), default_port) == 0) {
    host.resize(host.size() - default_port.size());
  }
  return host;
}

// Where a request goes: its URL, and the host and path that are signed.
struct Target {
  std::string url;
  std::string host;
  std::string path;  // unencoded, as signed
};

Target locate(const Connection& connection, const Request& request) {
  Target target;
  const std::string scheme = connection.endpoint.substr(0, connection.endpoint.find("://") + 3);
  const std::string endpoint_host = host_of(connection.endpoint);
  // A bucket name with dots cannot be a virtual host under a wildcard certificate: use path-style for it.
  if (connection.path_style || request.bucket.find('.') != std::string::npos) {
    target.host = endpoint_host;
    target.path = "/" + request.bucket + (request.key.empty() ? "/" : "/" + request.key);
  } else {
    target.host = request.bucket + "." + endpoint_host;
    target.path = "/" + request.key;
  }
  const std::string query_string = canonical_query(request.query);
  target.url = scheme + target.host + percent_encode(target.path, true) +
               (query_string.empty() ? "" : "?" + query_string);
  return target;
}

// What to check for the refusals whose cause is on this side. MinIO refuses temporary credentials that
// expired as an unknown access key (InvalidAccessKeyId) where AWS says ExpiredToken.
std::string refusal_hint(const std::string& code, bool temporary_credentials) {
  if (code == "SignatureDoesNotMatch") return "; check the secret access key that goes with this access key";
  if (code == "InvalidAccessKeyId")
    return temporary_credentials
               ? "; the server knows no such access key: temporary credentials (these have a "
                 "session token) are refused so once they expire: get new ones"
               : "; the server knows no such access key";
  if (code == "RequestTimeTooSkewed")
    return "; this machine's clock differs from the server's by more than 15 minutes: fix the clock (NTP)";
  if (code == "ExpiredToken") return "; the session token has expired: get new temporary credentials";
  if (code == "AccessDenied") return "; the credentials' policy does not allow this on this bucket";
  return "";
}

// Fails for the transport failures no retry can help; the cause for the others; none for an answer.
std::optional<std::string> transport_failure(const http::Response& response, const std::string& what) {
  switch (response.transport) {
    case http::Transport::ok:
      return std::nullopt;
    case http::Transport::untrusted:
      fail(ExitCode::usage, "{}: TLS verification failed ({}); give the endpoint's CA with AWS_CA_BUNDLE",
           what, response.transport_error);
    case http::Transport::bad_url:
      fail(ExitCode::usage, "{}: bad endpoint URL ({})", what, response.transport_error);
    case http::Transport::cancelled:
      fail(ExitCode::network, "{}: cancelled after another transfer failed", what);
    case http::Transport::source_failed:
      fail(ExitCode::output, "{}: cannot read the file to upload ({})", what, response.transport_error);
    case http::Transport::transient:
    case http::Transport::sink_refused:
      break;
  }
  return response.transport_error;
}

}  // namespace

http::Response Channel::send(const Request& request) const {
  const Connection& connection = sender_.connection();
  const Target target = locate(connection, request);
  http::Request sent;
  sent.method = request.method;
  sent.url = target.url;
  sent.body = request.body;
  sent.body_size = request.body_size;
  sent.sink = request.sink;
  if (connection.credentials.anonymous()) {
    sent.headers = request.headers;
  } else {
    SignableRequest signable;
    signable.method = request.method;
    signable.host = target.host;
    signable.path = target.path;
    signable.query = request.query;
    signable.headers = request.headers;
    signable.payload_sha256 = request.payload_sha256;
    sent.headers = sign(signable, connection.credentials, connection.region, std::time(nullptr)).headers;
  }
  return handle_.perform(sent, &cancelled_);
}

void Channel::retrying(const std::string& what,
                       const std::function<std::optional<std::string>()>& attempt) const {
  retry(sender_.settings().retry, [&]() -> std::optional<std::string> {
    if (cancelled_.load()) fail(ExitCode::network, "{}: cancelled after another transfer failed", what);
    const std::optional<std::string> cause = attempt();
    if (!cause) return std::nullopt;
    return fmt::format("{}: {}", what, *cause);
  });
}

// Borrows an idle connection (or makes one) and returns it when done, so connections are reused across
// listings, downloads and uploads.
class Sender::ConnectionLease {
 public:
  explicit ConnectionLease(Sender& sender) : sender_(sender) {
    std::lock_guard<std::mutex> lock(sender_.idle_connections_mutex_);
    if (!sender_.idle_connections_.empty()) {
      handle_ = std::move(sender_.idle_connections_.back());
      sender_.idle_connections_.pop_back();
    }
    if (!handle_) handle_ = std::make_unique<http::Handle>(sender_.settings_.http);
  }
  ~ConnectionLease() {
    std::lock_guard<std::mutex> lock(sender_.idle_connections_mutex_);
    sender_.idle_connections_.push_back(std::move(handle_));
  }
  http::Handle& get() { return *handle_; }

 private:
  Sender& sender_;
  std::unique_ptr<http::Handle> handle_;
};

Sender::Sender(Connection connection, TransferSettings settings)
    : connection_(std::move(connection)), settings_(std::move(settings)) {
  settings_.parallelism = std::max(1, settings_.parallelism);
  settings_.part_size = std::max<std::uint64_t>(settings_.part_size, 5ull << 20);  // S3's minimum part
  if (settings_.http.ca_bundle.empty()) settings_.http.ca_bundle = connection_.ca_bundle;
}

std::string Sender::describe(const std::string& method, const std::string& bucket,
                             const std::string& key) const {
  return fmt::format("{} s3://{}/{} at {}", method, bucket, key, connection_.endpoint);
}

std::optional<std::string> Sender::check(const http::Response& response, const std::string& what,
                                         std::initializer_list<long> expected) const {
  if (response.transport != http::Transport::ok) return transport_failure(response, what);
  if (std::find(expected.begin(), expected.end(), response.status) != expected.end()) return std::nullopt;
  const xml::ErrorBody error = xml::parse_error(response.body);
  const std::string cause =
      fmt::format("HTTP {}{}{}", response.status, error.code.empty() ? "" : " " + error.code,
                  error.message.empty() ? "" : ": " + error.message);
  // S3 may name a transient failure in the error body of another status (400 RequestTimeout), and a body
  // that arrived other than it was sent (its checksum or signed SHA-256 differs: AWS's BadDigest, MinIO's
  // XAmzContent*Mismatch) is sent again.
  static const std::set<std::string> kRetriedCodes = {"SlowDown",
                                                      "RequestTimeout",
                                                      "InternalError",
                                                      "BadDigest",
                                                      "XAmzContentChecksumMismatch",
                                                      "XAmzContentSHA256Mismatch"};
  if (http::transient_status(response.status) || kRetriedCodes.count(error.code) != 0) return cause;
  if (response.status == 401 || response.status == 403) {
    fail(ExitCode::usage, "{}: {} (credentials from {}{})", what, cause, connection_.credentials.source,
         refusal_hint(error.code, !connection_.credentials.session_token.empty()));
  }
  if (response.status == 412)
    fail(ExitCode::network, "{}: the object changed on the server while it was read ({})", what, cause);
  fail(ExitCode::data, "{}: {}", what, cause);
}

void Sender::on_one_connection(const std::function<void(const Channel&)>& call) {
  const std::atomic<bool> never_cancelled{false};
  ConnectionLease lease(*this);
  call(Channel(*this, lease.get(), never_cancelled));
}

void Sender::run_parallel(std::size_t count, const std::function<void(const Channel&, std::size_t)>& task) {
  std::atomic<bool> cancelled{false};
  run_on_threads(count, settings_.parallelism, [&](TaskQueue& queue) {
    ConnectionLease lease(*this);
    const Channel channel(*this, lease.get(), cancelled);
    queue.drain([&](std::size_t index) {
      try {
        task(channel, index);
      } catch (...) {
        cancelled = true;  // this call's transfers under way stop retrying
        throw;
      }
    });
  });
}

}  // namespace tp::s3
