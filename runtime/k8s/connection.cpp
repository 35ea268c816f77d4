#include "k8s/connection.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "common/base64.h"
#include "common/error.h"
#include "common/files.h"

namespace fs = std::filesystem;

namespace tp::k8s {
namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// common's read_file, refused as what the file is for ("cannot read the kubeconfig PATH").
std::string read_named(const fs::path& path, const std::string& what) {
  try {
    return read_file(path, ExitCode::usage);
  } catch (const Error&) {
    fail(ExitCode::usage, "cannot read {} {}", what, path.string());
  }
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// The kubeconfig kubectl would read; empty when there is none.
std::string kubeconfig_path(const ConnectOptions& options) {
  if (!options.kubeconfig.empty()) return options.kubeconfig;
  const std::string listed = environment("KUBECONFIG");
  if (!listed.empty()) return listed.substr(0, listed.find(':'));
  const std::string home = environment("HOME");
  if (!home.empty() && fs::exists(fs::path(home) / ".kube" / "config")) return home + "/.kube/config";
  return "";
}

// The entry `name` of the list `key` (clusters, contexts, users), its inner map (cluster, context, user).
YAML::Node named_entry(const YAML::Node& config, const std::string& key, const std::string& inner,
                       const std::string& name, const std::string& where) {
  for (const YAML::Node& entry : config[key]) {
    if (entry["name"] && entry["name"].as<std::string>() == name && entry[inner]) return entry[inner];
  }
  fail(ExitCode::usage, "{}: {} has no entry named '{}'", where, key, name);
}

std::string text_of(const YAML::Node& map, const std::string& key) {
  return map[key] ? map[key].as<std::string>() : std::string();
}

// A path in a kubeconfig is relative to the kubeconfig's folder.
fs::path beside(const std::string& kubeconfig, const std::string& path) {
  return fs::path(path).is_absolute() ? fs::path(path) : fs::path(kubeconfig).parent_path() / path;
}

void read_cluster(const YAML::Node& cluster, const std::string& kubeconfig, const std::string& where,
                  Connection& connection) {
  connection.server = text_of(cluster, "server");
  if (connection.server.empty()) fail(ExitCode::usage, "{}: the cluster has no server", where);
  if (cluster["insecure-skip-tls-verify"] && cluster["insecure-skip-tls-verify"].as<bool>()) {
    fail(ExitCode::usage, "{}: insecure-skip-tls-verify is not supported: give the cluster's "
         "certificate-authority (or certificate-authority-data)", where);
  }
  const std::string data = text_of(cluster, "certificate-authority-data");
  if (!data.empty()) {
    connection.ca_pem = base64_decode(data);
    if (connection.ca_pem.empty()) fail(ExitCode::usage, "{}: certificate-authority-data is not base64", where);
  } else if (cluster["certificate-authority"]) {
    connection.ca_pem = read_named(beside(kubeconfig, text_of(cluster, "certificate-authority")),
                                  where + ": certificate-authority");
  }
}

void read_user(const YAML::Node& user, const std::string& kubeconfig, const std::string& where,
               Connection& connection) {
  if (user["token"]) {
    connection.token = text_of(user, "token");
  } else if (user["tokenFile"]) {
    connection.token = trimmed(read_named(beside(kubeconfig, text_of(user, "tokenFile")), where + ": tokenFile"));
  } else if (user["exec"] || user["auth-provider"] || user["client-certificate"] || user["client-certificate-data"]) {
    fail(ExitCode::usage, "{}: trainpoint signs in with a token (token or tokenFile), and this user has none (client "
         "certificates and exec or auth-provider plugins are not supported): use a service account's token, as "
         "a notebook pod has", where);
  } else {
    fail(ExitCode::usage, "{}: the user has no token or tokenFile", where);
  }
}

Connection from_kubeconfig(const std::string& path, const ConnectOptions& options) {
  YAML::Node config;
  try {
    config = YAML::Load(read_named(path, "the kubeconfig"));
  } catch (const YAML::Exception& error) {
    fail(ExitCode::usage, "kubeconfig {}:{}:{}: {}", path, error.mark.line + 1, error.mark.column + 1, error.msg);
  }
  const std::string context_name = options.context.empty() ? text_of(config, "current-context") : options.context;
  if (context_name.empty()) fail(ExitCode::usage, "kubeconfig {}: no current-context, and no --context given", path);
  Connection connection;
  connection.origin = "kubeconfig " + path + ", context " + context_name;
  try {
    const YAML::Node context = named_entry(config, "contexts", "context", context_name, connection.origin);
    read_cluster(named_entry(config, "clusters", "cluster", text_of(context, "cluster"), connection.origin), path,
                 connection.origin, connection);
    read_user(named_entry(config, "users", "user", text_of(context, "user"), connection.origin), path,
              connection.origin, connection);
    connection.name_space = text_of(context, "namespace");
  } catch (const YAML::Exception& error) {
    fail(ExitCode::usage, "{}: {}", connection.origin, error.msg);
  }
  return connection;
}

Connection in_cluster(const ConnectOptions& options) {
  const std::string host = environment("KUBERNETES_SERVICE_HOST");
  const fs::path token = fs::path(options.service_account_dir) / "token";
  if (host.empty() || !fs::exists(token)) {
    fail(ExitCode::usage, "no Kubernetes cluster to talk to: give --kubeconfig (or set KUBECONFIG), or run in a pod "
         "with a service account (such as a Kubeflow notebook)");
  }
  Connection connection;
  connection.origin = "the pod's service account (" + options.service_account_dir + ")";
  const std::string port = environment("KUBERNETES_SERVICE_PORT");
  // An IPv6 address needs brackets in a URL.
  const std::string address = host.find(':') == std::string::npos ? host : "[" + host + "]";
  connection.server = "https://" + address + ":" + (port.empty() ? "443" : port);
  connection.token = trimmed(read_named(token, "the service account token"));
  const fs::path ca = fs::path(options.service_account_dir) / "ca.crt";
  if (fs::exists(ca)) connection.ca_pem = read_named(ca, "the service account CA");
  const fs::path name_space = fs::path(options.service_account_dir) / "namespace";
  if (fs::exists(name_space)) connection.name_space = trimmed(read_named(name_space, "the service account namespace"));
  return connection;
}

}  // namespace

Connection connect(const ConnectOptions& options) {
  const std::string kubeconfig = kubeconfig_path(options);
  Connection connection = kubeconfig.empty() ? in_cluster(options) : from_kubeconfig(kubeconfig, options);
  while (!connection.server.empty() && connection.server.back() == '/') connection.server.pop_back();
  if (!options.name_space.empty()) connection.name_space = options.name_space;
  if (connection.name_space.empty()) connection.name_space = "default";
  return connection;
}

}  // namespace tp::k8s
