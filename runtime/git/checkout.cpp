#include "git/checkout.h"

#include <git2.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <memory>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/url.h"
#include "git/auth.h"
#include "git/lfs.h"
#include "git/libgit2.h"
#include "git/mirror.h"
#include "git/parallel_checkout.h"
#include "git/remote_url.h"
#include "git/write_failure.h"

namespace tp::git {
namespace {

namespace fs = std::filesystem;

constexpr int max_submodule_depth = 8;
constexpr const char* system_ca_file = "/etc/ssl/certs/ca-certificates.crt";

using Repository = std::unique_ptr<git_repository, void (*)(git_repository*)>;

bool is_full_sha(const std::string& ref) {
  return ref.size() == GIT_OID_HEXSZ && std::all_of(ref.begin(), ref.end(), [](unsigned char c) {
           return std::isxdigit(c) && !std::isupper(c);
         });
}

// Everything one checkout() call shares between the repository and its submodules.
struct Job {
  const CheckoutRequest& request;
  RemoteUrl main_remote;
  fs::path scratch;    // workdir/checkouts, for temporary mirrors
  fs::path ca_file;    // the CA bundle for LFS downloads; empty: the system's
  std::string unique;  // names this call's temporary files
  int temporary_mirrors = 0;

  fs::path next_temporary_mirror() {
    return scratch / fmt::format(".mirror-{}-{}", unique, temporary_mirrors++);
  }
};

// Trusts the custom CA bundle in addition to the system's, for libgit2 (process-wide) and LFS.
// Returns the combined bundle's path (empty without a custom bundle).
fs::path configure_tls(const CheckoutRequest& request, const fs::path& scratch) {
  if (request.ca_bundle.empty()) {
    // The setting is process-wide: undo a bundle that an earlier checkout in this process set.
    if (fs::exists(system_ca_file)) git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, system_ca_file, nullptr);
    return {};
  }
  std::string bundle = read_file(request.ca_bundle, ExitCode::source);
  if (fs::exists(system_ca_file)) bundle = read_file(system_ca_file, ExitCode::source) + "\n" + bundle;
  const fs::path combined = scratch / ".ca-bundle.pem";
  write_file_atomic(combined, bundle);
  if (git_libgit2_opts(GIT_OPT_SET_SSL_CERT_LOCATIONS, combined.c_str(), nullptr) != 0) {
    fail(ExitCode::source, "cannot use CA bundle {}: {}", request.ca_bundle.string(), libgit2_error());
  }
  return combined;
}

void check_expected(const CheckoutRequest& request, const std::string& sha) {
  if (request.expect_sha.empty()) return;
  std::string expected = request.expect_sha;
  std::transform(expected.begin(), expected.end(), expected.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (expected.size() < 7 || sha.compare(0, expected.size(), expected) != 0) {
    fail(ExitCode::source, "ref '{}' of {} resolved to {}, but the job expects {}",
         request.ref.empty() ? "HEAD" : request.ref, parse_remote_url(request.url).url, sha,
         request.expect_sha);
  }
}

void populate(Job& job, const RemoteUrl& remote, const std::string& sha, const fs::path& destination,
              const Mirror& mirror, int depth);

// Fetches a submodule's commit into its mirror and builds its working tree at `destination`.
void build_submodule(Job& job, const std::string& url, const std::string& sha, const fs::path& destination,
                     int depth) {
  const RemoteUrl remote = parse_remote_url(url);
  RemoteAccess access(job.request, job.main_remote, remote);
  Mirror mirror(job.request.cache_dir, job.next_temporary_mirror(), remote);
  mirror.update_for(sha, access, job.request.network_timeout);
  mirror.resolve(sha);
  mirror.share();
  populate(job, remote, sha, destination, mirror, depth);
}

void update_submodules(Job& job, git_repository* repo, const std::string& remote_url,
                       const fs::path& worktree, int depth) {
  std::vector<std::string> names;
  git_submodule_foreach(
      repo,
      [](git_submodule*, const char* name, void* payload) {
        static_cast<std::vector<std::string>*>(payload)->emplace_back(name);
        return 0;
      },
      &names);
  if (!names.empty() && depth >= max_submodule_depth) {
    fail(ExitCode::source, "submodules nest deeper than {} levels in {}", max_submodule_depth,
         worktree.string());
  }
  for (const auto& name : names) {
    git_submodule* raw = nullptr;
    if (git_submodule_lookup(&raw, repo, name.c_str()) != 0) {
      fail(ExitCode::source, "cannot read submodule '{}': {}", name, libgit2_error());
    }
    std::unique_ptr<git_submodule, void (*)(git_submodule*)> submodule(raw, git_submodule_free);
    const git_oid* head = git_submodule_head_id(raw);
    if (head == nullptr) continue;  // listed in .gitmodules but not committed: nothing to check out
    if (git_submodule_url(raw) == nullptr)
      fail(ExitCode::source, "submodule '{}' has no URL in .gitmodules", name);
    // Resolved here: libgit2 1.5 drops a slash of file:// URLs when resolving relative ones.
    const std::string resolved = resolve_submodule_url(remote_url, git_submodule_url(raw));
    // Record the URL in .git/config, as `git submodule init` does.
    git_config* config = nullptr;
    if (git_repository_config(&config, repo) != 0 ||
        git_config_set_string(config, ("submodule." + name + ".url").c_str(), resolved.c_str()) != 0) {
      git_config_free(config);
      write_failed("cannot record submodule " + name, libgit2_error());
    }
    git_config_free(config);
    char sha[GIT_OID_HEXSZ + 1] = {};
    git_oid_tostr(sha, sizeof sha, head);
    spdlog::info("submodule {} at {}: {}", git_submodule_path(raw), sha, redacted_url(resolved));
    build_submodule(job, resolved, sha, worktree / git_submodule_path(raw), depth + 1);
  }
}

// Builds the working tree of `sha` at `destination` from `mirror` (objects hard-linked where the
// filesystem allows), with its origin set to the credential-free URL, then its submodules and LFS files.
void populate(Job& job, const RemoteUrl& remote, const std::string& sha, const fs::path& destination,
              const Mirror& mirror, int depth) {
  git_clone_options options = GIT_CLONE_OPTIONS_INIT;
  options.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;
  git_repository* raw = nullptr;
  if (git_clone(&raw, mirror.path().c_str(), destination.c_str(), &options) != 0) {
    write_failed(fmt::format("cannot copy the mirror of {} to {}", remote.url, destination.string()),
                 libgit2_error());
  }
  Repository repo(raw, git_repository_free);
  git_oid oid;
  git_object* commit = nullptr;
  git_oid_fromstr(&oid, sha.c_str());
  if (git_remote_set_url(repo.get(), "origin", remote.url.c_str()) != 0 ||
      git_object_lookup(&commit, repo.get(), &oid, GIT_OBJECT_COMMIT) != 0) {
    write_failed(fmt::format("cannot prepare the checkout of {}", remote.url), libgit2_error());
  }
  std::unique_ptr<git_object, void (*)(git_object*)> owned_commit(commit, git_object_free);
  // Without attributes no file can be an LFS pointer to replace (filter=lfs is an attribute).
  const bool without_attributes = checkout_in_parallel(repo.get(), reinterpret_cast<git_commit*>(commit));
  if (!without_attributes) {
    git_checkout_options checkout_options = GIT_CHECKOUT_OPTIONS_INIT;
    checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
    if (git_checkout_tree(repo.get(), commit, &checkout_options) != 0) {
      write_failed(fmt::format("cannot check out {} of {}", sha, remote.url), libgit2_error());
    }
  }
  if (git_repository_set_head_detached(repo.get(), &oid) != 0) {
    write_failed(fmt::format("cannot check out {} of {}", sha, remote.url), libgit2_error());
  }
  if (job.request.submodules) update_submodules(job, repo.get(), remote.url, destination, depth);
  if (job.request.lfs && !without_attributes) {
    RemoteAccess access(job.request, job.main_remote, remote);
    fetch_lfs_objects(repo.get(), remote, access, job.request, job.ca_file);
  }
}

}  // namespace

std::string libgit2_version() {
  init_libgit2();
  int major = 0, minor = 0, revision = 0;
  git_libgit2_version(&major, &minor, &revision);
  return fmt::format("{}.{}.{}", major, minor, revision);
}

RemoteRef resolve_remote_ref(const CheckoutRequest& request) {
  init_libgit2();
  const fs::path checkouts = request.workdir / "checkouts";
  std::error_code created;
  fs::create_directories(checkouts, created);
  if (created) write_failed("cannot create " + checkouts.string(), created.message());
  configure_tls(request, checkouts);
  const RemoteUrl remote = parse_remote_url(request.url);
  RemoteAccess access(request, remote, remote);
  const std::vector<AdvertisedRef> refs = list_remote_refs(remote, access, request.network_timeout);

  const std::string wanted = request.ref.empty() ? "HEAD" : request.ref;
  // In checkout()'s order: a branch, a tag (peeled to its commit first), a full ref name.
  for (const std::string& name : {"refs/heads/" + wanted, "refs/tags/" + wanted + "^{}", "refs/tags/" + wanted, wanted}) {
    for (const auto& ref : refs) {
      if (ref.name != name) continue;
      check_expected(request, ref.sha);
      return {ref.name, ref.sha};
    }
  }
  const bool sha = wanted.size() >= 7 && wanted.size() <= GIT_OID_HEXSZ &&
                   std::all_of(wanted.begin(), wanted.end(), [](unsigned char c) { return std::isxdigit(c); });
  if (sha) {
    for (const auto& ref : refs) {
      if (ref.sha.compare(0, wanted.size(), wanted) != 0) continue;
      check_expected(request, ref.sha);
      return {ref.name, ref.sha};
    }
    check_expected(request, wanted);
    return {"", wanted};
  }
  if (request.ref.empty()) fail(ExitCode::source, "{} has no default branch (HEAD): give a ref", remote.url);
  std::vector<std::string> branches;
  for (const auto& ref : refs) {
    if (ref.name.rfind("refs/heads/", 0) == 0 && branches.size() < 8) branches.push_back(ref.name.substr(11));
  }
  fail(ExitCode::source, "ref '{}' not found in {}: it is not a branch, tag, full ref name or commit SHA there "
       "(branches: {})", request.ref, remote.url, branches.empty() ? "none" : fmt::format("{}", fmt::join(branches, ", ")));
}

Checkout checkout(const CheckoutRequest& request) {
  init_libgit2();
  static std::atomic<int> calls{0};
  const fs::path checkouts = request.workdir / "checkouts";
  std::error_code created;
  fs::create_directories(checkouts, created);
  if (created) write_failed("cannot create " + checkouts.string(), created.message());
  // A complete checkout of this exact commit is already there (only complete ones are renamed in).
  if (is_full_sha(request.ref) && fs::exists(checkouts / request.ref)) {
    check_expected(request, request.ref);
    spdlog::info("commit {} is already checked out at {}", request.ref, (checkouts / request.ref).string());
    return {checkouts / request.ref, request.ref};
  }

  Job job{request, parse_remote_url(request.url), checkouts, configure_tls(request, checkouts),
          fmt::format("{}-{}", ::getpid(), calls++)};
  RemoteAccess access(request, job.main_remote, job.main_remote);
  const fs::path staging = checkouts / (".incomplete-" + job.unique);
  // Whatever fails below, no partial tree stays behind under any name a later run could take as good.
  struct RemoveOnExit {
    fs::path path;
    ~RemoveOnExit() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } remove_staging{staging};

  std::string sha;
  {
    Mirror mirror(request.cache_dir, job.next_temporary_mirror(), job.main_remote);
    mirror.update_for(request.ref, access, request.network_timeout);
    sha = mirror.resolve(request.ref);
    spdlog::info("{} at '{}' is commit {}", job.main_remote.url, request.ref.empty() ? "HEAD" : request.ref,
                 sha);
    check_expected(request, sha);
    if (fs::exists(checkouts / sha)) return {checkouts / sha, sha};
    mirror.share();
    fs::remove_all(staging);
    populate(job, job.main_remote, sha, staging, mirror, 0);
  }

  const fs::path final_path = checkouts / sha;
  std::error_code renamed;
  fs::rename(staging, final_path, renamed);
  // Another process may have finished the same commit first: its complete copy is as good as ours.
  if (renamed && !fs::exists(final_path))
    write_failed("cannot move the checkout to " + final_path.string(), renamed.message());
  spdlog::info("checked out {} at {}", sha, final_path.string());
  return {final_path, sha};
}

}  // namespace tp::git
