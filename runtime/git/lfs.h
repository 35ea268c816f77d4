// Git LFS: replaces pointer files in a working tree by their content, fetched through the LFS
// batch API (https) or read from a local remote's .git/lfs/objects, and verified by size and SHA-256.
#pragma once

#include <git2.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "git/auth.h"
#include "git/checkout.h"
#include "git/remote_url.h"

namespace tp::git {

struct LfsPointer {
  std::string oid;  // hex SHA-256 of the content
  std::uint64_t size = 0;
};

// Parses the text of an LFS pointer file; nullopt if `text` is not one.
std::optional<LfsPointer> parse_lfs_pointer(std::string_view text);

// The LFS server URL for a remote (…/info/lfs), as git-lfs derives it; `.lfsconfig`'s lfs.url wins.
std::string lfs_endpoint(const RemoteUrl& remote, const std::filesystem::path& worktree);

// Replaces every pointer file tracked with filter=lfs in `repo`'s checked-out HEAD by its content.
// Objects are kept in .git/lfs/objects (and in the cache's lfs/objects when there is a cache).
// `ca_file`: the CA bundle for https (empty: the system's).
void fetch_lfs_objects(git_repository* repo, const RemoteUrl& remote, const RemoteAccess& access,
                       const CheckoutRequest& request, const std::filesystem::path& ca_file);

}  // namespace tp::git
