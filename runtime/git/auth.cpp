#include "git/auth.h"

#include <spdlog/spdlog.h>
// libgit2 1.8 moved git_error_set_str to the system headers (Ubuntu 24.04 has 1.7, Debian 13 1.9).
#if LIBGIT2_VER_MAJOR > 1 || (LIBGIT2_VER_MAJOR == 1 && LIBGIT2_VER_MINOR >= 8)
#include <git2/sys/errors.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/base64.h"
#include "common/digest.h"
#include "common/error.h"
#include "common/files.h"

namespace tp::git {
namespace {

// The key type name at the start of an SSH public key blob ("ssh-ed25519", "ssh-rsa", ...).
std::string key_type(const std::string& blob) {
  if (blob.size() < 4) return {};
  const std::size_t length = (static_cast<unsigned char>(blob[0]) << 24) |
                             (static_cast<unsigned char>(blob[1]) << 16) |
                             (static_cast<unsigned char>(blob[2]) << 8) | static_cast<unsigned char>(blob[3]);
  return length <= blob.size() - 4 ? blob.substr(4, length) : std::string();
}

// One host pattern of a known_hosts line: a name, `[name]:port`, or a hashed `|1|salt|hash` entry.
bool host_matches(const std::string& pattern, const std::string& name) {
  if (pattern.rfind("|1|", 0) == 0) {
    const auto separator = pattern.find('|', 3);
    if (separator == std::string::npos) return false;
    const std::string salt = base64_decode(pattern.substr(3, separator - 3));
    const std::string expected = base64_decode(pattern.substr(separator + 1));
    return expected == hmac(HashAlgorithm::sha1, salt, name);
  }
  return pattern == name;
}

std::string read_secret(const std::filesystem::path& file) {
  std::string secret = read_file(file, ExitCode::source);
  // Secret files often end with a newline that is not part of the token.
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) fail(ExitCode::source, "the git token file {} is empty", file.string());
  return secret;
}

std::filesystem::path default_known_hosts() {
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : "/root") / ".ssh" / "known_hosts";
}

}  // namespace

HostKeyStatus check_known_hosts(const std::filesystem::path& known_hosts, const std::string& host, int port,
                                const std::string& key_blob, std::string* detail) {
  const std::string name = port == 0 || port == 22 ? host : "[" + host + "]:" + std::to_string(port);
  const std::string type = key_type(key_blob);
  std::ifstream in(known_hosts);
  std::string line;
  std::string known_types;
  bool same_type_known = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string hosts, line_type, key;
    if (!(fields >> hosts) || hosts[0] == '#') continue;
    if (hosts[0] == '@') continue;  // @cert-authority / @revoked markers are not supported
    if (!(fields >> line_type >> key)) continue;
    bool matched = false;
    std::istringstream patterns(hosts);
    for (std::string pattern; std::getline(patterns, pattern, ',');)
      matched = matched || host_matches(pattern, name);
    if (!matched) continue;
    if (line_type == type && base64_decode(key) == key_blob) return HostKeyStatus::known;
    known_types += (known_types.empty() ? "" : ", ") + line_type;
    same_type_known = same_type_known || line_type == type;
  }
  if (detail != nullptr) *detail = known_types;
  // A host listed only with other key types is treated as unknown for this type, as OpenSSH does.
  return same_type_known ? HostKeyStatus::changed : HostKeyStatus::unknown_host;
}

std::string ssh_fingerprint(const std::string& key_blob) {
  std::string encoded = base64(digest(HashAlgorithm::sha256, key_blob));
  while (!encoded.empty() && encoded.back() == '=') encoded.pop_back();
  return "SHA256:" + encoded;
}

RemoteAccess::RemoteAccess(const CheckoutRequest& request, const RemoteUrl& main_remote,
                           const RemoteUrl& remote)
    : credential_host_(main_remote.host),
      ca_bundle_(request.ca_bundle),
      ssh_key_(request.ssh_key),
      known_hosts_(request.known_hosts.empty() ? default_known_hosts() : request.known_hosts),
      accept_unknown_host_(request.accept_unknown_host),
      ssh_port_(remote.port) {
  if (!request.token_file.empty()) {
    password_ = read_secret(request.token_file);
    token_source_ = "token file " + request.token_file.string();
  } else if (const char* value = request.token_env.empty() ? nullptr : std::getenv(request.token_env.c_str());
             value != nullptr && *value != '\0') {
    password_ = value;
    token_source_ = "environment variable " + request.token_env;
  } else if (!main_remote.password.empty()) {
    password_ = main_remote.password;
    token_source_ = "the URL's password";
  }
  username_ = !request.username.empty()   ? request.username
              : !main_remote.user.empty() ? main_remote.user
                                          : std::string("x-access-token");
  if (!ssh_key_.empty() && !std::filesystem::is_regular_file(ssh_key_)) {
    fail(ExitCode::source, "SSH key file {} does not exist", ssh_key_.string());
  }
}

void RemoteAccess::install(git_remote_callbacks& callbacks) {
  callbacks.credentials = &RemoteAccess::on_credentials;
  callbacks.certificate_check = &RemoteAccess::on_certificate;
  callbacks.transfer_progress = &RemoteAccess::on_transfer;
  callbacks.payload = this;
}

void RemoteAccess::reset_attempt() {
  requests_.clear();
  refusal_ = Refusal::none;
  refusal_detail_.clear();
}

bool RemoteAccess::credentials_for(const std::string& host, std::string* user, std::string* password) const {
  if (password_.empty() || host != credential_host_) return false;
  *user = username_;
  *password = password_;
  return true;
}

std::string RemoteAccess::redact(std::string text) const {
  if (password_.empty()) return text;
  for (auto at = text.find(password_); at != std::string::npos; at = text.find(password_, at)) {
    text.replace(at, password_.size(), "***");
  }
  return text;
}

int RemoteAccess::on_credentials(git_credential** out, const char* url, const char* username_from_url,
                                 unsigned int allowed_types, void* payload) {
  return static_cast<RemoteAccess*>(payload)->credentials(out, url, username_from_url, allowed_types);
}

int RemoteAccess::on_certificate(git_cert* cert, int valid, const char* host, void* payload) {
  return static_cast<RemoteAccess*>(payload)->certificate(cert, valid, host);
}

int RemoteAccess::on_transfer(const git_indexer_progress* stats, void* payload) {
  auto& access = *static_cast<RemoteAccess*>(payload);
  if (access.progress_) access.progress_(*stats);
  return 0;
}

int RemoteAccess::refuse(Refusal refusal, std::string detail, int code) {
  refusal_ = refusal;
  refusal_detail_ = std::move(detail);
  git_error_set_str(GIT_ERROR_CALLBACK, refusal_detail_.c_str());
  return code;
}

int RemoteAccess::credentials(git_credential** out, const char* url, const char* username_from_url,
                              unsigned int allowed) {
  // libgit2 asks again after the server rejected what we gave: that is an authentication failure.
  const bool asked_before = std::find(requests_.begin(), requests_.end(), url) != requests_.end();
  requests_.emplace_back(url);
  if (allowed & GIT_CREDENTIAL_USERNAME) {
    return git_credential_username_new(out, username_from_url != nullptr ? username_from_url : "git");
  }
  if (allowed & GIT_CREDENTIAL_SSH_KEY) {
    if (ssh_key_.empty()) {
      return refuse(Refusal::credentials_missing, "the server asks for an SSH key and none was given",
                    GIT_EAUTH);
    }
    if (asked_before) {
      return refuse(Refusal::credentials_rejected, "the server rejected the SSH key " + ssh_key_.string(),
                    GIT_EAUTH);
    }
    return git_credential_ssh_key_new(out, username_from_url != nullptr ? username_from_url : "git", nullptr,
                                      ssh_key_.c_str(), nullptr);
  }
  if (allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) {
    const RemoteUrl parsed = parse_remote_url(url);
    std::string user, password;
    if (!credentials_for(parsed.host, &user, &password)) {
      return refuse(Refusal::credentials_missing,
                    "the server asks for credentials and none were given for " + parsed.host, GIT_EAUTH);
    }
    if (asked_before) {
      return refuse(Refusal::credentials_rejected,
                    "the server rejected the credentials from " + token_source_, GIT_EAUTH);
    }
    return git_credential_userpass_plaintext_new(out, user.c_str(), password.c_str());
  }
  return refuse(Refusal::credentials_missing,
                "the server asks for a kind of credentials trainpoint cannot give", GIT_EAUTH);
}

int RemoteAccess::certificate(git_cert* cert, int valid, const char* host) {
  if (cert->cert_type == GIT_CERT_X509) {
    if (valid) return 0;
    return refuse(Refusal::tls_untrusted,
                  fmt::format("the TLS certificate of {} is not trusted by the system CAs{}", host,
                              ca_bundle_.empty() ? " (give the server's CA with a CA bundle)"
                                                 : " nor by " + ca_bundle_.string()),
                  GIT_ECERTIFICATE);
  }
  if (cert->cert_type != GIT_CERT_HOSTKEY_LIBSSH2) return GIT_PASSTHROUGH;
  const auto* hostkey = reinterpret_cast<const git_cert_hostkey*>(cert);
  if (!(hostkey->type & GIT_CERT_SSH_RAW)) {
    return refuse(Refusal::host_unknown, "the SSH transport gave no raw host key to check", GIT_ECERTIFICATE);
  }
  const std::string blob(hostkey->hostkey, hostkey->hostkey_len);
  std::string known_types;
  switch (check_known_hosts(known_hosts_, host, ssh_port_, blob, &known_types)) {
    case HostKeyStatus::known:
      return 0;
    case HostKeyStatus::changed:
      return refuse(
          Refusal::host_key_changed,
          fmt::format("HOST KEY MISMATCH: {} presented {} key {}, which differs from the one in {}: "
                      "the server was reinstalled or someone is intercepting the connection",
                      host, key_type(blob), ssh_fingerprint(blob), known_hosts_.string()),
          GIT_ECERTIFICATE);
    case HostKeyStatus::unknown_host:
      if (accept_unknown_host_) {
        spdlog::warn(
            "accepting the unknown SSH host key {} of {} (not in {}) because unknown hosts are allowed",
            ssh_fingerprint(blob), host, known_hosts_.string());
        return 0;
      }
      return refuse(
          Refusal::host_unknown,
          fmt::format("host {} ({} key {}) is not in {}{}: add it with ssh-keyscan, after checking the "
                      "fingerprint",
                      host, key_type(blob), ssh_fingerprint(blob), known_hosts_.string(),
                      known_types.empty() ? "" : " (it lists only " + known_types + " keys for it)"),
          GIT_ECERTIFICATE);
  }
  return GIT_ECERTIFICATE;
}

}  // namespace tp::git
