// The servers the git tests talk to, started once for the whole test binary on free loopback
// ports: git daemon (git://), nginx + fcgiwrap + git http-backend over HTTPS (a test CA, basic
// auth under /private/, a Git LFS batch endpoint), and OpenSSH sshd with key authentication.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "support/background_process.h"
#include "support/temp_dir.h"

namespace tp::testing {

class GitServers {
 public:
  // Starts everything on first use; the servers live until the test binary exits.
  static GitServers& get();

  const std::filesystem::path& root() const { return root_.path(); }
  std::filesystem::path repos() const { return root() / "repos"; }
  // A commit SHA or LFS oid that make_fixtures.sh printed (C1..C4, LFS_OID, ...).
  const std::string& value(const std::string& key) const { return values_.at(key); }

  std::string git_url(const std::string& repo) const;
  std::string https_url(const std::string& repo, bool private_area = false) const;
  std::string ssh_url(const std::string& repo) const;
  int git_port() const { return git_port_; }
  int https_port() const { return https_port_; }
  int ssh_port() const { return ssh_port_; }

  std::filesystem::path ca_file() const { return root() / "tls" / "ca.crt"; }
  std::filesystem::path other_ca_file() const { return root() / "tls" / "other-ca.crt"; }
  std::filesystem::path client_key() const { return root() / "ssh" / "client"; }
  std::filesystem::path stranger_key() const { return root() / "ssh" / "stranger"; }
  // known_hosts with the server's real key; one with another key for the same host; one without it.
  std::filesystem::path known_hosts() const { return root() / "ssh" / "known_hosts"; }
  std::filesystem::path wrong_known_hosts() const { return root() / "ssh" / "known_hosts_wrong"; }
  std::filesystem::path empty_known_hosts() const { return root() / "ssh" / "known_hosts_empty"; }
  static constexpr const char* token = "s3cret-token-value";
  static constexpr const char* token_user = "tokenuser";

 private:
  GitServers();
  void start_git_daemon();
  void start_https();
  void start_sshd();

  TempDir root_;
  std::map<std::string, std::string> values_;
  int git_port_ = 0;
  int https_port_ = 0;
  int ssh_port_ = 0;
  std::unique_ptr<BackgroundProcess> git_daemon_;
  std::unique_ptr<BackgroundProcess> fcgiwrap_;
  std::unique_ptr<BackgroundProcess> nginx_;
  std::unique_ptr<BackgroundProcess> sshd_;
};

}  // namespace tp::testing
