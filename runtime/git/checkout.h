// Clones a git repository with libgit2 and checks out one exact commit, with its submodules and
// Git LFS files. See docs/git.md for the transports, authentication options and exit classes.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

namespace tp::git {

struct CheckoutRequest {
  std::string url;  // a local path, file://, git://, https:// or ssh:// URL, or scp-like user@host:path
  std::string ref;  // full or short SHA, branch, tag, or full ref name; empty: the remote's HEAD
  std::filesystem::path workdir;  // checkouts are made under workdir/checkouts
  // When set, the job fails unless `ref` resolves to this commit (a full SHA, or a prefix of it).
  std::string expect_sha;
  // A node-local directory holding one mirror per URL; empty: no cache (a temporary mirror is used).
  std::filesystem::path cache_dir;

  // HTTPS credentials: the password or token comes from `token_file` (a mounted secret) if set,
  // else from the environment variable named `token_env`, else from the URL's user:password@.
  std::filesystem::path token_file;
  std::string token_env = "TRAINPOINT_GIT_TOKEN";
  std::string username;  // empty: the URL's user, else "x-access-token" (any name works with tokens)
  // PEM file of CAs trusted in addition to the system's (/etc/ssl/certs/ca-certificates.crt).
  std::filesystem::path ca_bundle;

  // SSH: a private key file (its .pub beside it is not needed) and the known_hosts file that the
  // server's host key is checked against (empty: ~/.ssh/known_hosts).
  std::filesystem::path ssh_key;
  std::filesystem::path known_hosts;
  bool accept_unknown_host =
      false;  // accept (with a warning) a host absent from known_hosts; never a changed key

  bool submodules = true;  // recursive
  bool lfs = true;         // replace Git LFS pointers by their content
  // Transient network failures are retried with backoff until this much time has passed.
  std::chrono::seconds network_timeout{300};
};

struct Checkout {
  std::filesystem::path path;  // the working tree: workdir/checkouts/<commit>
  std::string commit;          // the full SHA that `ref` resolved to
};

// The checkout appears at its final path only when complete (it is built under a temporary
// name and renamed), so an interrupted run never leaves a half checkout that a later run reuses.
// Throws tp::Error: ExitCode::source for a missing repository or ref, rejected credentials, an
// unknown or changed host key, an untrusted certificate or a corrupt LFS object;
// ExitCode::network when transient transport failures outlast network_timeout;
// ExitCode::storage when the disk is full.
Checkout checkout(const CheckoutRequest& request);

// What `ref` names on the remote, asked without fetching anything (like `git ls-remote`).
struct RemoteRef {
  std::string name;  // the advertised ref that matched; empty for a SHA that no ref points at
  std::string sha;   // its commit; for a SHA that no ref points at, the SHA as given
};

// Resolves request.ref (empty: HEAD) as checkout() does: a branch, a tag, a full ref name or a commit SHA.
// A SHA that is no advertised ref's tip cannot be checked without fetching: it is returned as given.
// Throws tp::Error: ExitCode::source for a missing repository or ref, rejected credentials, an unknown or
// changed host key, or a commit other than expect_sha; ExitCode::network when transient failures
// outlast network_timeout.
RemoteRef resolve_remote_ref(const CheckoutRequest& request);

std::string libgit2_version();

}  // namespace tp::git
