// A remote's URL split into its parts, so credentials never travel with the URL itself.
#pragma once

#include <filesystem>
#include <string>

namespace tp::git {

enum class Transport { local, https, http, ssh, git };

struct RemoteUrl {
  Transport transport = Transport::local;
  std::string url;       // the URL without user name or password: safe to log and to store in .git/config
  std::string user;      // from the URL (`user@host`), empty if none
  std::string password;  // from the URL (`user:password@host`); a secret, empty if none
  std::string host;      // empty for local remotes
  int port = 0;          // 0: the transport's default
  std::filesystem::path local_path;  // the repository's directory, for local remotes
};

// Parses a local path, a file://, git://, http(s):// or ssh:// URL, or scp-like `user@host:path`.
RemoteUrl parse_remote_url(const std::string& url);

// Resolves a submodule's URL relative to its superproject's (`../lib.git`), as git does;
// other URLs are returned unchanged.
std::string resolve_submodule_url(const std::string& superproject_url, const std::string& url);

}  // namespace tp::git
