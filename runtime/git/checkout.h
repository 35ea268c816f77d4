// Clones a git repository with libgit2 and checks out one exact commit.
#pragma once

#include <filesystem>
#include <string>

namespace tp::git {

struct CheckoutRequest {
  std::string url;  // a local path, file://, git://, https:// or ssh:// URL
  std::string ref;  // full or short SHA, branch, tag, or full ref name; empty: the remote's HEAD
  std::filesystem::path workdir;  // checkouts are made under workdir/checkouts
};

struct Checkout {
  std::filesystem::path path;  // the working tree
  std::string commit;          // the full SHA that `ref` resolved to
};

// The checkout appears at its final path only when complete (it is built under a temporary
// name and renamed), so an interrupted run never leaves a half checkout that a later run reuses.
// Throws tp::Error: ExitCode::source for a missing repository or ref, ExitCode::network for
// transport failures.
Checkout checkout(const CheckoutRequest& request);

std::string libgit2_version();

}  // namespace tp::git
