#include "git/remote_url.h"

#include <string_view>

#include "common/error.h"
#include "common/url.h"

namespace tp::git {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Splits "user:password@host:port" into its parts; `authority` has no path.
void parse_authority(std::string_view authority, RemoteUrl& remote) {
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    const auto colon = userinfo.find(':');
    remote.user = std::string(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) remote.password = std::string(userinfo.substr(colon + 1));
    authority.remove_prefix(at + 1);
  }
  std::string_view host = authority;
  std::string_view port;
  if (starts_with(authority, "[")) {  // [::1]:2222
    const auto close = authority.find(']');
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size() && authority[close + 1] == ':') port = authority.substr(close + 2);
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  remote.host = std::string(host);
  if (!port.empty()) {
    try {
      remote.port = std::stoi(std::string(port));
    } catch (const std::exception&) {
      fail(ExitCode::source, "invalid port '{}' in git URL", port);
    }
  }
}

}  // namespace

RemoteUrl parse_remote_url(const std::string& url) {
  RemoteUrl remote;
  if (url.empty()) fail(ExitCode::source, "the git URL is empty: give a repository URL or path");
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    // scp-like `[user@]host:path` (a colon before any slash), else a local path.
    const auto colon = url.find(':');
    const auto slash = url.find('/');
    if (colon != std::string::npos && colon > 0 && (slash == std::string::npos || colon < slash)) {
      remote.transport = Transport::ssh;
      parse_authority(std::string_view(url).substr(0, colon), remote);
      remote.port = 0;
      remote.url = (remote.user.empty() ? "" : remote.user + "@") + remote.host + url.substr(colon);
      return remote;
    }
    remote.transport = Transport::local;
    remote.local_path = std::filesystem::absolute(url);
    remote.url = remote.local_path.string();
    return remote;
  }
  const std::string scheme = url.substr(0, scheme_end);
  const std::string rest = url.substr(scheme_end + 3);
  if (scheme == "file") {
    remote.transport = Transport::local;
    remote.local_path = rest;
    remote.url = redacted_url(url);
    return remote;
  }
  if (scheme == "https") {
    remote.transport = Transport::https;
  } else if (scheme == "http") {
    remote.transport = Transport::http;
  } else if (scheme == "ssh" || scheme == "git+ssh" || scheme == "ssh+git") {
    remote.transport = Transport::ssh;
  } else if (scheme == "git") {
    remote.transport = Transport::git;
  } else {
    fail(ExitCode::source, "unsupported git URL scheme '{}' in {}: use https, ssh, git, file or a local path",
         scheme, redacted_url(url));
  }
  const auto path_start = rest.find('/');
  const std::string authority = rest.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "" : rest.substr(path_start);
  parse_authority(authority, remote);
  const std::string host_port =
      authority.substr(authority.rfind('@') == std::string::npos ? 0 : authority.rfind('@') + 1);
  // The user name is kept for ssh (it selects the account), dropped for http(s) where it is a credential.
  const bool keep_user = remote.transport == Transport::ssh && !remote.user.empty();
  remote.url = scheme + "://" + (keep_user ? remote.user + "@" : "") + host_port + path;
  return remote;
}

std::string resolve_submodule_url(const std::string& superproject_url, const std::string& url) {
  if (!starts_with(url, "./") && !starts_with(url, "../")) return url;
  std::string resolved = superproject_url;
  while (!resolved.empty() && resolved.back() == '/') resolved.pop_back();
  std::string_view rest = url;
  while (true) {
    if (starts_with(rest, "./")) {
      rest.remove_prefix(2);
    } else if (starts_with(rest, "../")) {
      rest.remove_prefix(3);
      // The last path component ends at a '/', or at the ':' of an scp-like `host:path`. In a URL only a
      // '/' of the path counts: a ':' of the authority (a port, a password) is no separator.
      const auto scheme = resolved.find("://");
      const auto separator = scheme == std::string::npos ? resolved.find_last_of("/:")
                             : resolved.find('/', scheme + 3) == std::string::npos ? std::string::npos
                                                                                   : resolved.rfind('/');
      if (separator == std::string::npos) {
        fail(ExitCode::source, "submodule URL '{}' goes above the root of {}", url,
             redacted_url(superproject_url));
      }
      resolved.erase(resolved[separator] == ':' ? separator + 1 : separator);
    } else {
      break;
    }
  }
  return resolved + (!resolved.empty() && resolved.back() == ':' ? "" : "/") + std::string(rest);
}

}  // namespace tp::git
