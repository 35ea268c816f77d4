#include "git/mirror.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "common/digest.h"
#include "common/error.h"
#include "common/log.h"
#include "common/retry.h"
#include "git/libgit2.h"

namespace tp::git {
namespace {

namespace fs = std::filesystem;

bool is_hex(const std::string& text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isxdigit(c); });
}

// "host-name-<hash>.git": readable, and unique per URL (the hash covers the whole credential-free URL).
std::string mirror_name(const RemoteUrl& remote) {
  const std::string hash = sha256_hex(remote.url).substr(0, 16);
  std::string base = fs::path(remote.url).filename().string();
  if (base.size() > 4 && base.compare(base.size() - 4, 4, ".git") == 0) base.resize(base.size() - 4);
  std::string name = remote.host.empty() ? base : remote.host + "-" + base;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
  }
  return name.substr(0, 80) + "-" + hash + ".git";
}

// libgit2 writes to sockets without MSG_NOSIGNAL, so a server closing the connection would kill
// the process with SIGPIPE. This blocks SIGPIPE on the calling thread for the duration of a fetch
// (the write then fails with EPIPE, which is reported) and discards one that arrived meanwhile.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&sigpipe_);
    sigaddset(&sigpipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigpipe_, &previous_);
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) && !sigismember(&previous_, SIGPIPE)) {
      const timespec no_wait{0, 0};
      sigtimedwait(&sigpipe_, nullptr, &no_wait);
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t sigpipe_;
  sigset_t previous_;
};

// Turns a failed libgit2 remote operation into a tp::Error with its own message and exit class.
[[noreturn]] void fetch_failed(int status, const RemoteUrl& remote, const RemoteAccess& access) {
  const git_error* error = git_error_last();
  const std::string cause = access.redact(libgit2_error());
  const int error_class = error != nullptr ? error->klass : GIT_ERROR_NONE;
  const std::string& url = remote.url;
  switch (access.refusal()) {
    case Refusal::credentials_missing:
    case Refusal::credentials_rejected:
      fail(ExitCode::source, "authentication failed for {}: {}", url, access.refusal_detail());
    case Refusal::host_unknown:
      fail(ExitCode::source, "unknown SSH host key for {}: {}", url, access.refusal_detail());
    case Refusal::host_key_changed:
      fail(ExitCode::source, "host key mismatch for {}: {}", url, access.refusal_detail());
    case Refusal::tls_untrusted:
      fail(ExitCode::source, "TLS certificate not trusted for {}: {}", url, access.refusal_detail());
    case Refusal::none:
      break;
  }
  const auto mentions = [&](const char* text) { return cause.find(text) != std::string::npos; };
  if (mentions("No space left") || mentions("Disk quota")) {
    fail(ExitCode::storage, "disk full while fetching {}: {}", url, cause);
  }
  if (status == GIT_EAUTH || mentions("status code: 401") || mentions("status code: 403") ||
      mentions("authentication")) {
    fail(ExitCode::source, "authentication failed for {}: {}", url, cause);
  }
  if (status == GIT_ECERTIFICATE || (error_class == GIT_ERROR_SSL && mentions("certificate"))) {
    fail(ExitCode::source, "TLS certificate not trusted for {}: {}", url, cause);
  }
  if (status == GIT_ENOTFOUND || mentions("status code: 404") || mentions("not found") ||
      mentions("does not appear to be a git repository") || mentions("could not find repository") ||
      mentions("not exported") || mentions("No such file or directory")) {
    fail(ExitCode::source, "repository not found: {} ({})", url, cause);
  }
  fail(ExitCode::network, "cannot fetch {}: {}", url, cause);
}

}  // namespace

std::vector<AdvertisedRef> list_remote_refs(const RemoteUrl& remote, RemoteAccess& access,
                                            std::chrono::seconds timeout) {
  if (remote.transport == Transport::local && !fs::exists(remote.local_path)) {
    fail(ExitCode::source, "repository not found: {} (no such directory)", remote.url);
  }
  git_remote* raw = nullptr;
  if (git_remote_create_detached(&raw, remote.url.c_str()) != 0) {
    fail(ExitCode::source, "invalid git URL {}: {}", remote.url, libgit2_error());
  }
  std::unique_ptr<git_remote, void (*)(git_remote*)> owned(raw, git_remote_free);
  std::vector<AdvertisedRef> refs;
  retry_network_errors(RetryPolicy::within(timeout), [&] {
    access.reset_attempt();
    git_remote_callbacks callbacks = GIT_REMOTE_CALLBACKS_INIT;
    access.install(callbacks);
    SigpipeBlocked sigpipe_blocked;
    const int status = git_remote_connect(raw, GIT_DIRECTION_FETCH, &callbacks, nullptr, nullptr);
    if (status != 0) fetch_failed(status, remote, access);
    const git_remote_head** heads = nullptr;
    std::size_t count = 0;
    if (git_remote_ls(&heads, &count, raw) != 0) fetch_failed(GIT_ERROR, remote, access);
    refs.clear();
    for (std::size_t i = 0; i < count; ++i) {
      char sha[GIT_OID_HEXSZ + 1] = {};
      git_oid_tostr(sha, sizeof sha, &heads[i]->oid);
      refs.push_back({heads[i]->name, sha});
    }
    git_remote_disconnect(raw);
  });
  return refs;
}

Mirror::Mirror(const fs::path& cache_dir, const fs::path& temporary_path, const RemoteUrl& remote)
    : remote_(remote), temporary_(cache_dir.empty()) {
  if (temporary_) {
    path_ = temporary_path;
    fs::remove_all(path_);
  } else {
    const fs::path mirrors = cache_dir / "mirrors";
    std::error_code created;
    fs::create_directories(mirrors, created);
    if (created)
      fail(ExitCode::storage, "cannot create git cache {}: {}", mirrors.string(), created.message());
    path_ = mirrors / mirror_name(remote);
    lock_ = std::make_unique<FileLock>(path_.string() + ".lock", "updating this git cache entry");
    if (fs::exists(path_) && git_repository_open_bare(&repo_, path_.c_str()) == 0) return;
    if (fs::exists(path_)) {
      spdlog::warn("git cache entry {} is unreadable ({}); recreating it", path_.string(), libgit2_error());
      fs::remove_all(path_);
    }
  }
  if (git_repository_init(&repo_, path_.c_str(), /*is_bare=*/1) != 0) {
    const std::string cause = libgit2_error();
    fail(cause.find("No space left") != std::string::npos ? ExitCode::storage : ExitCode::output,
         "cannot create git mirror {}: {}", path_.string(), cause);
  }
}

Mirror::~Mirror() {
  git_repository_free(repo_);
  if (temporary_) {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
}

bool Mirror::has_commit(const std::string& sha) const {
  git_oid oid;
  git_object* object = nullptr;
  if (git_oid_fromstr(&oid, sha.c_str()) != 0 ||
      git_object_lookup(&object, repo_, &oid, GIT_OBJECT_COMMIT) != 0) {
    return false;
  }
  git_object_free(object);
  return true;
}

void Mirror::update_for(const std::string& ref, RemoteAccess& access, std::chrono::seconds timeout) {
  const bool full_sha = ref.size() == GIT_OID_HEXSZ && is_hex(ref);
  if (full_sha && has_commit(ref)) {
    spdlog::info("commit {} is already in the git cache: no fetch", ref);
    return;
  }
  std::vector<std::string> refspecs = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
  const bool branch_or_tag = ref.rfind("refs/heads/", 0) == 0 || ref.rfind("refs/tags/", 0) == 0;
  if (ref.rfind("refs/", 0) == 0 && !branch_or_tag) refspecs.push_back("+" + ref + ":" + ref);
  retry_network_errors(RetryPolicy::within(timeout), [&] { fetch(refspecs, access); });
  if (full_sha && !has_commit(ref)) {
    // A commit on no branch or tag (a pull request's head, a force-pushed one): ask for it by
    // SHA, which servers that allow unadvertised wants (GitHub, GitLab) serve.
    try {
      fetch({"+" + ref + ":refs/trainpoint/commits/" + ref}, access);
    } catch (const Error& error) {
      spdlog::debug("{} does not serve commit {} by SHA: {}", remote_.url, ref, error.what());
    }
  }
}

void Mirror::fetch(const std::vector<std::string>& refspecs, RemoteAccess& access) {
  access.reset_attempt();
  if (remote_.transport == Transport::local && !fs::exists(remote_.local_path)) {
    fail(ExitCode::source, "repository not found: {} (no such directory)", remote_.url);
  }
  git_remote* remote = nullptr;
  if (git_remote_create_anonymous(&remote, repo_, remote_.url.c_str()) != 0) {
    fail(ExitCode::source, "invalid git URL {}: {}", remote_.url, libgit2_error());
  }
  std::unique_ptr<git_remote, void (*)(git_remote*)> owned(remote, git_remote_free);
  git_fetch_options options = GIT_FETCH_OPTIONS_INIT;
  options.prune = GIT_FETCH_PRUNE;
  options.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;  // the refspecs already name the tags
  options.update_fetchhead = 0;
  access.install(options.callbacks);
  std::vector<char*> specs;
  for (const auto& spec : refspecs) specs.push_back(const_cast<char*>(spec.c_str()));
  const git_strarray spec_array{specs.data(), specs.size()};
  // A progress line for the objects received (every few seconds in Kubernetes logs).
  std::unique_ptr<log::Progress> progress;
  unsigned int reported = 0;
  access.on_progress([&](const git_indexer_progress& stats) {
    if (stats.total_objects == 0) return;
    if (!progress)
      progress = std::make_unique<log::Progress>("fetching " + remote_.url, stats.total_objects, "objects");
    progress->set_note(fmt::format("{:.1f} MiB", stats.received_bytes / 1048576.0));
    progress->advance(stats.received_objects - reported);
    reported = stats.received_objects;
  });
  int status = 0;
  {
    SigpipeBlocked sigpipe_blocked;
    status = git_remote_fetch(remote, &spec_array, &options, "trainpoint fetch");
  }
  access.on_progress(nullptr);
  if (status != 0) fetch_failed(status, remote_, access);
  if (progress) {
    progress->finish();
  } else {
    spdlog::info("{} has nothing new", remote_.url);
  }
  // Remember the remote's default branch, which an empty ref means.
  git_buf head = GIT_BUF_INIT;
  if (git_remote_default_branch(&head, remote) == 0) {
    git_repository_set_head(repo_, head.ptr);
    git_buf_dispose(&head);
  }
}

std::string Mirror::resolve(const std::string& ref) const {
  const std::vector<std::string> candidates =
      ref.empty() ? std::vector<std::string>{"HEAD"}
                  : std::vector<std::string>{"refs/heads/" + ref, "refs/tags/" + ref, ref};
  for (const auto& candidate : candidates) {
    git_object* object = nullptr;
    const int status = git_revparse_single(&object, repo_, (candidate + "^{commit}").c_str());
    if (status == 0) {
      char sha[GIT_OID_HEXSZ + 1] = {};
      git_oid_tostr(sha, sizeof sha, git_object_id(object));
      git_object_free(object);
      return sha;
    }
    if (status == GIT_EAMBIGUOUS) {
      fail(ExitCode::source, "short SHA '{}' is ambiguous in {}: give more digits", ref, remote_.url);
    }
  }
  if (ref.empty()) fail(ExitCode::source, "{} has no default branch (HEAD): give a ref", remote_.url);
  fail(ExitCode::source,
       "ref '{}' not found in {}: it is not a branch, tag, full ref name or commit SHA there ({})", ref,
       remote_.url, libgit2_error());
}

}  // namespace tp::git
