// Credentials and server identity checks for libgit2's transports: HTTPS user/token, SSH key,
// known_hosts host-key checking. The callbacks record why they refused, so that a failure can be
// reported as "authentication failed" or "host key mismatch" rather than libgit2's generic text.
#pragma once

#include <git2.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "git/checkout.h"
#include "git/remote_url.h"

namespace tp::git {

enum class HostKeyStatus { known, unknown_host, changed };

// Looks `key_blob` (the server's raw public key, as in known_hosts' base64 field) up for `host`
// (`[host]:port` entries when port is not 22; hashed `|1|` entries included).
// `detail` receives the key types known_hosts has for the host when the status is not `known`.
HostKeyStatus check_known_hosts(const std::filesystem::path& known_hosts, const std::string& host, int port,
                                const std::string& key_blob, std::string* detail = nullptr);

// "SHA256:..." fingerprint of a raw public key, as ssh-keygen -l prints it.
std::string ssh_fingerprint(const std::string& key_blob);

enum class Refusal {
  none,
  credentials_missing,
  credentials_rejected,
  host_unknown,
  host_key_changed,
  tls_untrusted
};

// What one remote operation may present, and what its callbacks refused.
class RemoteAccess {
 public:
  // Reads the token or password (file, environment, URL) now, so a missing file fails early.
  // `main_remote` is the checkout's own URL (https credentials go to its host only); `remote` the one
  // this operation talks to (the same, or a submodule's).
  RemoteAccess(const CheckoutRequest& request, const RemoteUrl& main_remote, const RemoteUrl& remote);

  // Installs the credential, certificate and transfer-progress callbacks, with this object as
  // their payload (libgit2 gives all callbacks one payload).
  void install(git_remote_callbacks& callbacks);
  // Called with the transfer's counts while objects are received.
  void on_progress(std::function<void(const git_indexer_progress&)> report) { progress_ = std::move(report); }
  // Clears what the callbacks recorded, before another attempt.
  void reset_attempt();

  Refusal refusal() const { return refusal_; }
  const std::string& refusal_detail() const { return refusal_detail_; }
  // The https user name and password for `host`, if credentials were given for it.
  bool credentials_for(const std::string& host, std::string* user, std::string* password) const;
  // `text` with every secret replaced by "***".
  std::string redact(std::string text) const;

 private:
  static int on_credentials(git_credential** out, const char* url, const char* username_from_url,
                            unsigned int allowed_types, void* payload);
  static int on_certificate(git_cert* cert, int valid, const char* host, void* payload);
  static int on_transfer(const git_indexer_progress* stats, void* payload);
  int credentials(git_credential** out, const char* url, const char* username_from_url, unsigned int allowed);
  int certificate(git_cert* cert, int valid, const char* host);
  int refuse(Refusal refusal, std::string detail, int code);

  std::string credential_host_;  // https credentials are sent to this host only
  std::string username_;
  std::string password_;
  std::string token_source_;  // where the password came from, for messages (never the value)
  std::filesystem::path ca_bundle_;
  std::filesystem::path ssh_key_;
  std::filesystem::path known_hosts_;
  bool accept_unknown_host_ = false;
  int ssh_port_ = 22;
  std::function<void(const git_indexer_progress&)> progress_;
  std::vector<std::string> requests_;  // URLs credentials were asked for in this attempt
  Refusal refusal_ = Refusal::none;
  std::string refusal_detail_;
};

}  // namespace tp::git
