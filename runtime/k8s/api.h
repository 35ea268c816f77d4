// The Kubernetes API server's REST calls that trainpoint's job commands make (submit, status, logs, cancel),
// over http's libcurl handle with the connection's bearer token and CA. A refused call is a tp::Error that
// names the method, the path and the server's own Status message; its class says who can fix it: the user
// (usage: 401 credentials, 403 RBAC or quota, 404, 409 exists, 422 invalid) or time (network: no answer,
// 429, 5xx, after common/retry.h's policy).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "k8s/connection.h"

namespace tp::http {
class Handle;
}

namespace tp::k8s {

class Api {
 public:
  explicit Api(Connection connection);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  const Connection& connection() const { return connection_; }

  nlohmann::json get(const std::string& path);
  // nullopt when the server answers 404.
  std::optional<nlohmann::json> find(const std::string& path);
  // POST of `body` (JSON, or YAML with content_type application/yaml).
  nlohmann::json create(const std::string& path, const std::string& body,
                        const std::string& content_type = "application/json");
  // PATCH with a JSON merge patch.
  nlohmann::json merge_patch(const std::string& path, const nlohmann::json& patch);
  // DELETE with `options` (a DeleteOptions object) as its body; nullopt when it was already gone.
  std::optional<nlohmann::json> remove(const std::string& path, const nlohmann::json& options);
  // A GET whose body is text (a pod's log): handed to `sink` as it arrives, until the server ends it or
  // the sink returns false. Waits without limit for the next bytes (a followed log may be quiet for hours).
  void stream(const std::string& path, const std::function<bool(std::string_view)>& sink);

 private:
  // The body of a 2xx answer; nullopt for a 404 where `allow_missing`; a refusal otherwise throws.
  std::optional<std::string> exchange(const std::string& method, const std::string& path, const std::string& body,
                                      const std::string& content_type, bool allow_missing);

  Connection connection_;
  std::unique_ptr<http::Handle> handle_;
};

}  // namespace tp::k8s
