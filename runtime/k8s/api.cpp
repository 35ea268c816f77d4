#include "k8s/api.h"

#include <fmt/format.h>

#include <utility>

#include "common/error.h"
#include "common/retry.h"
#include "http/transfer.h"

namespace tp::k8s {
namespace {

http::Settings settings_for(const Connection& connection, std::chrono::seconds stall_timeout) {
  http::Settings settings;
  settings.ca_pem = connection.ca_pem;
  settings.stall_timeout = stall_timeout;
  return settings;
}

http::Request request_for(const Connection& connection, const std::string& method, const std::string& path) {
  http::Request request;
  request.method = method;
  request.url = connection.server + path;
  request.headers.emplace_back("Accept", "application/json");
  if (!connection.token.empty()) request.headers.emplace_back("Authorization", "Bearer " + connection.token);
  return request;
}

// The server's own words: a Status object's message, else the start of the body.
std::string status_message(const std::string& body) {
  const nlohmann::json status = nlohmann::json::parse(body, nullptr, false);
  if (status.is_object() && status.contains("message") && status["message"].is_string()) {
    return status["message"].get<std::string>();
  }
  return body.substr(0, 300);
}

ExitCode exit_class_of(long status) { return http::transient_status(status) ? ExitCode::network : ExitCode::usage; }

std::string what_to_do(long status) {
  switch (status) {
    case 401: return " (the token is not accepted: expired or revoked?)";
    case 403: return " (RBAC, a quota or an admission rule: ask the platform team for the permission named)";
    default: return "";
  }
}

// Throws the server's refusal of a non-2xx answer, in the class of who can fix it.
void check_answer(const std::string& method, const std::string& path, const http::Response& response) {
  if (response.status >= 200 && response.status < 300) return;
  fail(exit_class_of(response.status), "the Kubernetes API server refused {} {}: HTTP {}: {}{}", method, path,
       response.status, status_message(response.body), what_to_do(response.status));
}

}  // namespace

Api::Api(Connection connection)
    : connection_(std::move(connection)),
      handle_(std::make_unique<http::Handle>(settings_for(connection_, std::chrono::seconds(30)))) {}

Api::~Api() = default;

std::optional<std::string> Api::exchange(const std::string& method, const std::string& path, const std::string& body,
                                         const std::string& content_type, bool allow_missing) {
  http::Request request = request_for(connection_, method, path);
  if (!content_type.empty()) {
    request.headers.emplace_back("Content-Type", content_type);
    request.body = http::text_body(body);
    request.body_size = body.size();
  }
  http::Response response;
  RetryPolicy policy;
  policy.max_attempts = 5;
  retry(policy, [&]() -> std::optional<std::string> {
    response = handle_->perform(request);
    if (response.transport == http::Transport::transient) {
      return fmt::format("{} {}{}: {}", method, connection_.server, path, response.transport_error);
    }
    if (response.transport != http::Transport::ok) {
      fail(ExitCode::usage, "{} {}{}: {} ({})", method, connection_.server, path, response.transport_error,
           connection_.origin);
    }
    if (http::transient_status(response.status)) {
      return fmt::format("{} {}{}: HTTP {}: {}", method, connection_.server, path, response.status,
                         status_message(response.body));
    }
    return std::nullopt;
  });
  if (allow_missing && response.status == 404) return std::nullopt;
  check_answer(method, path, response);
  return response.body;
}

nlohmann::json Api::get(const std::string& path) {
  return nlohmann::json::parse(*exchange("GET", path, "", "", false));
}

std::optional<nlohmann::json> Api::find(const std::string& path) {
  const std::optional<std::string> body = exchange("GET", path, "", "", true);
  if (!body) return std::nullopt;
  return nlohmann::json::parse(*body);
}

nlohmann::json Api::create(const std::string& path, const std::string& body, const std::string& content_type) {
  return nlohmann::json::parse(*exchange("POST", path, body, content_type, false));
}

nlohmann::json Api::merge_patch(const std::string& path, const nlohmann::json& patch) {
  return nlohmann::json::parse(*exchange("PATCH", path, patch.dump(), "application/merge-patch+json", false));
}

std::optional<nlohmann::json> Api::remove(const std::string& path, const nlohmann::json& options) {
  const std::optional<std::string> body = exchange("DELETE", path, options.dump(), "application/json", true);
  if (!body) return std::nullopt;
  return nlohmann::json::parse(*body);
}

void Api::stream(const std::string& path, const std::function<bool(std::string_view)>& sink) {
  http::Handle handle(settings_for(connection_, std::chrono::hours(24 * 365)));
  http::Request request = request_for(connection_, "GET", path);
  request.sink = [&](const http::Response&, const char* data, std::size_t size) {
    return sink(std::string_view(data, size));
  };
  const http::Response response = handle.perform(request);
  if (response.transport == http::Transport::sink_refused) return;
  if (response.transport != http::Transport::ok) {
    fail(ExitCode::network, "GET {}{}: {}", connection_.server, path, response.transport_error);
  }
  check_answer("GET", path, response);
}

}  // namespace tp::k8s
