#include "s3/credentials.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/url.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string trim(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  const auto end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

// Field names from the shell and JSON files, compared lower-case without '_' or '-'.
std::string normalized(std::string_view name) {
  std::string out;
  for (unsigned char c : name) {
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(c));
  }
  return out;
}

enum class Field { none, endpoint, access_key, secret_key, session_token };

Field field_of(std::string_view name) {
  static const std::map<std::string, Field> fields = {
      {"miniourl", Field::endpoint},          {"url", Field::endpoint},
      {"endpoint", Field::endpoint},          {"endpointurl", Field::endpoint},
      {"minioaccesskey", Field::access_key},  {"accesskey", Field::access_key},
      {"accesskeyid", Field::access_key},     {"awsaccesskeyid", Field::access_key},
      {"miniosecretkey", Field::secret_key},  {"secretkey", Field::secret_key},
      {"secretaccesskey", Field::secret_key}, {"awssecretaccesskey", Field::secret_key},
      {"sessiontoken", Field::session_token}, {"awssessiontoken", Field::session_token},
  };
  const auto found = fields.find(normalized(name));
  return found == fields.end() ? Field::none : found->second;
}

struct FileCredentials {
  Credentials credentials;
  std::string endpoint;
};

void assign(FileCredentials& out, std::string_view name, std::string value) {
  switch (field_of(name)) {
    case Field::endpoint:
      out.endpoint = std::move(value);
      break;
    case Field::access_key:
      out.credentials.access_key_id = std::move(value);
      break;
    case Field::secret_key:
      out.credentials.secret_access_key = std::move(value);
      break;
    case Field::session_token:
      out.credentials.session_token = std::move(value);
      break;
    case Field::none:
      break;
  }
}

std::string unquote(std::string value) {
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
    return value.substr(1, value.size() - 2);
  }
  return value;
}

// `export MINIO_ACCESS_KEY=...` lines as the Vault agent renders them, or a JSON object with the same fields.
FileCredentials parse_credentials_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ExitCode::usage, "cannot read S3 credentials file {}", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  FileCredentials out;
  const std::string trimmed = trim(text);
  if (!trimmed.empty() && trimmed.front() == '{') {
    const auto json = nlohmann::json::parse(trimmed, nullptr, false);
    if (json.is_discarded() || !json.is_object()) {
      fail(ExitCode::usage, "S3 credentials file {} is not a JSON object", path.string());
    }
    for (const auto& [name, value] : json.items()) {
      if (value.is_string()) assign(out, name, value.get<std::string>());
    }
  } else {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      line = trim(line);
      if (line.empty() || line.front() == '#') continue;
      if (line.rfind("export ", 0) == 0) line = trim(line.substr(7));
      const auto equals = line.find('=');
      if (equals == std::string::npos) continue;
      assign(out, trim(line.substr(0, equals)), unquote(trim(line.substr(equals + 1))));
    }
  }
  if (out.credentials.access_key_id.empty() || out.credentials.secret_access_key.empty()) {
    fail(ExitCode::usage, "S3 credentials file {} has no access key and secret key", path.string());
  }
  out.credentials.source = "file " + path.string();
  return out;
}

using IniSections = std::map<std::string, std::map<std::string, std::string>>;

IniSections parse_ini(const fs::path& path) {
  IniSections sections;
  std::ifstream in(path);
  std::string line;
  std::string section;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = trim(line.substr(1, line.size() - 2));
      continue;
    }
    const auto equals = line.find('=');
    if (equals != std::string::npos)
      sections[section][trim(line.substr(0, equals))] = trim(line.substr(equals + 1));
  }
  return sections;
}

fs::path home_file(const char* override_variable, const char* relative) {
  const std::string override_path = env(override_variable);
  if (!override_path.empty()) return override_path;
  const std::string home = env("HOME");
  return home.empty() ? fs::path() : fs::path(home) / relative;
}

// The Vault agent's file for this job: minio-<tenant>, or the only minio-* file when no tenant is named.
std::optional<fs::path> vault_file(const std::string& tenant) {
  const std::string override_dir = env("TRAINPOINT_VAULT_SECRETS_DIR");
  const fs::path directory = override_dir.empty() ? fs::path("/vault/secrets") : fs::path(override_dir);
  std::error_code error;
  if (!tenant.empty()) {
    for (const fs::path& candidate :
         {directory / ("minio-" + tenant), directory / ("minio-" + tenant + ".json")}) {
      if (fs::is_regular_file(candidate, error)) return candidate;
    }
    fail(ExitCode::usage, "S3 tenant '{}' was named but {} has no minio-{} or minio-{}.json", tenant,
         directory.string(), tenant, tenant);
  }
  if (!fs::is_directory(directory, error)) return std::nullopt;
  std::vector<std::string> tenants;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("minio-", 0) != 0) continue;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) name.resize(name.size() - 5);
    if (std::find(tenants.begin(), tenants.end(), name) == tenants.end()) tenants.push_back(name);
  }
  if (tenants.empty()) return std::nullopt;
  if (tenants.size() > 1) {
    std::sort(tenants.begin(), tenants.end());
    fail(ExitCode::usage,
         "{} holds several MinIO credential files ({}): name one with --s3-tenant or TRAINPOINT_S3_TENANT",
         directory.string(), fmt::format("{}", fmt::join(tenants, ", ")));
  }
  // The shell file is the one the Vault agent renders first; its JSON twin is used when it is absent.
  const fs::path shell = directory / tenants.front();
  return fs::is_regular_file(shell, error) ? shell : fs::path(shell.string() + ".json");
}

struct AwsProfile {
  Credentials credentials;
  std::string region;
};

// ~/.aws/credentials and ~/.aws/config for AWS_PROFILE (or "default").
AwsProfile aws_shared_profile() {
  const std::string named_profile = env("AWS_PROFILE");
  const std::string profile = named_profile.empty() ? "default" : named_profile;
  const fs::path credentials_path = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const fs::path config_path = home_file("AWS_CONFIG_FILE", ".aws/config");
  const IniSections credentials = parse_ini(credentials_path);
  const IniSections config = parse_ini(config_path);
  const auto config_section = config.find(profile == "default" ? "default" : "profile " + profile);
  const auto credentials_section = credentials.find(profile);
  if (!named_profile.empty() && config_section == config.end() && credentials_section == credentials.end()) {
    fail(ExitCode::usage, "AWS_PROFILE '{}' is in neither {} nor {}", profile, credentials_path.string(),
         config_path.string());
  }
  AwsProfile out;
  auto take = [&](const std::map<std::string, std::string>& values, const std::string& origin) {
    const auto key = values.find("aws_access_key_id");
    const auto secret = values.find("aws_secret_access_key");
    // An empty value counts as absent, as a missing line does: half a key pair is no credentials.
    if (key == values.end() || secret == values.end() || key->second.empty() || secret->second.empty() ||
        !out.credentials.anonymous()) {
      return;
    }
    out.credentials.access_key_id = key->second;
    out.credentials.secret_access_key = secret->second;
    const auto token = values.find("aws_session_token");
    if (token != values.end()) out.credentials.session_token = token->second;
    out.credentials.source = fmt::format("AWS shared file {} [{}]", origin, profile);
  };
  if (credentials_section != credentials.end()) take(credentials_section->second, credentials_path.string());
  if (config_section != config.end()) {
    take(config_section->second, config_path.string());
    const auto region = config_section->second.find("region");
    if (region != config_section->second.end()) out.region = region->second;
  }
  return out;
}

// "host[:port]" gains https://; anything else must be http(s)://host[:port][/path] with a host.
std::string normalized_endpoint(std::string endpoint, const std::string& source) {
  endpoint = trim(endpoint);
  const std::string given = endpoint;
  if (endpoint.find("://") == std::string::npos) endpoint = "https://" + endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  const auto scheme_end = endpoint.find("://");
  std::string scheme = endpoint.substr(0, scheme_end);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto host_start = scheme_end + 3;
  const auto host_end = std::min(endpoint.find_first_of(":/", host_start), endpoint.size());
  if ((scheme != "http" && scheme != "https") || host_end == host_start) {
    fail(ExitCode::usage, "the S3 endpoint '{}' from {} is not a URL: write http://HOST[:PORT] or https://HOST[:PORT]",
         redacted_url(given), source);
  }
  return endpoint;
}

bool is_aws_endpoint(const std::string& endpoint) {
  const auto host_start = endpoint.find("://") + 3;
  const std::string host = endpoint.substr(host_start, endpoint.find_first_of(":/", host_start) - host_start);
  return host.size() >= 14 && host.compare(host.size() - 14, 14, ".amazonaws.com") == 0;
}

}  // namespace

Connection resolve_connection(const ConnectionOptions& options) {
  Connection connection;
  std::string file_endpoint;

  // 1. A file named by the spec or CLI, 2. the environment, 3. Vault's MinIO file, 4. AWS shared files.
  const std::string named_file =
      !options.credentials_file.empty() ? options.credentials_file : env("TRAINPOINT_S3_CREDENTIALS");
  const std::string tenant = !options.tenant.empty() ? options.tenant : env("TRAINPOINT_S3_TENANT");
  AwsProfile profile;
  if (!named_file.empty()) {
    auto file = parse_credentials_file(named_file);
    connection.credentials = std::move(file.credentials);
    file_endpoint = std::move(file.endpoint);
  } else if (!env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    connection.credentials.access_key_id = env("AWS_ACCESS_KEY_ID");
    connection.credentials.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
    connection.credentials.session_token = env("AWS_SESSION_TOKEN");
    connection.credentials.source = connection.credentials.session_token.empty()
                                        ? "environment (AWS_ACCESS_KEY_ID)"
                                        : "environment (AWS_ACCESS_KEY_ID with AWS_SESSION_TOKEN)";
  } else if (const auto vault = vault_file(tenant)) {
    auto file = parse_credentials_file(*vault);
    connection.credentials = std::move(file.credentials);
    file_endpoint = std::move(file.endpoint);
  } else {
    profile = aws_shared_profile();
    connection.credentials = profile.credentials;
  }
  if (connection.credentials.anonymous()) connection.credentials.source = "none (anonymous requests)";

  connection.region = options.region;
  for (const char* variable : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    if (connection.region.empty()) connection.region = env(variable);
  }
  if (connection.region.empty()) connection.region = profile.region.empty() ? "us-east-1" : profile.region;

  const std::pair<std::string, std::string> endpoint_candidates[] = {
      {options.endpoint, "the spec or command line"},
      {env("AWS_ENDPOINT_URL_S3"), "AWS_ENDPOINT_URL_S3"},
      {env("AWS_ENDPOINT_URL"), "AWS_ENDPOINT_URL"},
      {env("S3_ENDPOINT_URL"), "S3_ENDPOINT_URL"},
      {env("MINIO_URL"), "MINIO_URL"},
      {file_endpoint, connection.credentials.source},
  };
  for (const auto& [endpoint, source] : endpoint_candidates) {
    if (!endpoint.empty()) {
      connection.endpoint = normalized_endpoint(endpoint, source);
      connection.endpoint_source = source;
      break;
    }
  }
  if (connection.endpoint.empty()) {
    connection.endpoint = fmt::format("https://s3.{}.amazonaws.com", connection.region);
    connection.endpoint_source = "AWS default for the region";
  }
  connection.path_style = options.path_style.value_or(!is_aws_endpoint(connection.endpoint));
  connection.ca_bundle = !options.ca_bundle.empty() ? options.ca_bundle : env("AWS_CA_BUNDLE");
  return connection;
}

}  // namespace tp::s3
