#include "git/checkout.h"

#include <git2.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "common/error.h"

namespace tp::git {
namespace {

struct Library {
  Library() { git_libgit2_init(); }
  ~Library() { git_libgit2_shutdown(); }
};

std::string last_error() {
  const git_error* error = git_error_last();
  return error != nullptr && error->message != nullptr ? error->message : "unknown libgit2 error";
}

using Repository = std::unique_ptr<git_repository, void (*)(git_repository*)>;
using Object = std::unique_ptr<git_object, void (*)(git_object*)>;

// Resolves `ref` in a fresh clone: remote branches first (what a user means by a branch name),
// then tags, full ref names and SHAs.
Object resolve(git_repository* repo, const std::string& ref, const std::string& url) {
  const std::vector<std::string> candidates =
      ref.empty() ? std::vector<std::string>{"HEAD"}
                  : std::vector<std::string>{"refs/remotes/origin/" + ref, "refs/tags/" + ref, ref};
  for (const auto& candidate : candidates) {
    git_object* object = nullptr;
    if (git_revparse_single(&object, repo, (candidate + "^{commit}").c_str()) == 0) {
      return Object(object, git_object_free);
    }
  }
  fail(ExitCode::source, "ref '{}' not found in {}: give a commit SHA, branch or tag that exists there", ref, url);
}

[[noreturn]] void clone_failed(int status, const std::string& url) {
  const std::string cause = last_error();
  const git_error* error = git_error_last();
  const int error_class = error != nullptr ? error->klass : GIT_ERROR_NONE;
  if (status == GIT_ENOTFOUND || error_class == GIT_ERROR_OS || cause.find("not found") != std::string::npos ||
      cause.find("does not appear to be a git repository") != std::string::npos ||
      cause.find("could not find repository") != std::string::npos) {
    fail(ExitCode::source, "repository not found: {} ({})", url, cause);
  }
  if (status == GIT_EAUTH) fail(ExitCode::source, "authentication failed for {} ({})", url, cause);
  fail(ExitCode::network, "cannot fetch {}: {}", url, cause);
}

}  // namespace

std::string libgit2_version() {
  int major = 0, minor = 0, revision = 0;
  git_libgit2_version(&major, &minor, &revision);
  return fmt::format("{}.{}.{}", major, minor, revision);
}

Checkout checkout(const CheckoutRequest& request) {
  static Library library;
  namespace fs = std::filesystem;
  const fs::path checkouts = request.workdir / "checkouts";
  fs::create_directories(checkouts);
  const fs::path staging = checkouts / fmt::format(".incomplete-{}", ::getpid());
  fs::remove_all(staging);

  git_clone_options options = GIT_CLONE_OPTIONS_INIT;
  options.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;
  git_repository* raw_repo = nullptr;
  if (const int status = git_clone(&raw_repo, request.url.c_str(), staging.c_str(), &options); status != 0) {
    fs::remove_all(staging);
    clone_failed(status, request.url);
  }
  Repository repo(raw_repo, git_repository_free);

  Object commit = resolve(repo.get(), request.ref, request.url);
  char sha[GIT_OID_HEXSZ + 1] = {};
  git_oid_tostr(sha, sizeof sha, git_object_id(commit.get()));

  git_checkout_options checkout_options = GIT_CHECKOUT_OPTIONS_INIT;
  checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
  if (git_checkout_tree(repo.get(), commit.get(), &checkout_options) != 0 ||
      git_repository_set_head_detached(repo.get(), git_object_id(commit.get())) != 0) {
    const std::string cause = last_error();
    repo.reset();
    fs::remove_all(staging);
    fail(ExitCode::storage, "cannot check out {} of {}: {}", sha, request.url, cause);
  }
  repo.reset();

  const fs::path final_path = checkouts / sha;
  if (fs::exists(final_path)) {
    // A complete checkout of this commit is already there (only complete ones are ever renamed in).
    fs::remove_all(staging);
  } else {
    fs::rename(staging, final_path);
  }
  return {final_path, sha};
}

}  // namespace tp::git
