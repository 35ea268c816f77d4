// Bare mirrors of remotes: the node-local cache keyed by URL (locked with flock, so several ranks or
// a restarted pod share it safely), or a temporary mirror when no cache is configured.
#pragma once

#include <git2.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/file_lock.h"
#include "git/auth.h"
#include "git/remote_url.h"

namespace tp::git {

// One ref a remote advertises (what `git ls-remote` prints).
struct AdvertisedRef {
  std::string name;  // such as refs/heads/main, refs/tags/v1^{} (a peeled tag) or HEAD
  std::string sha;
};

// The refs `remote` advertises, without fetching anything, retrying transient failures within `timeout`.
// Throws tp::Error as a fetch would: source (repository missing, credentials, host key), network.
std::vector<AdvertisedRef> list_remote_refs(const RemoteUrl& remote, RemoteAccess& access,
                                            std::chrono::seconds timeout);

class Mirror {
 public:
  // The cached mirror of `remote` under `cache_dir`, created if needed and locked exclusively; or,
  // when `cache_dir` is empty, a new mirror at `temporary_path`, removed on destruction.
  Mirror(const std::filesystem::path& cache_dir, const std::filesystem::path& temporary_path,
         const RemoteUrl& remote);
  ~Mirror();
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  // Fetches what `ref` needs (branches, tags and the remote HEAD; or the full ref it names),
  // retrying transient failures within `timeout`. A full SHA already in the mirror needs no fetch;
  // one that no branch or tag reaches is then asked for by SHA.
  void update_for(const std::string& ref, RemoteAccess& access, std::chrono::seconds timeout);
  // The full SHA of the commit `ref` names. Throws ExitCode::source if there is none.
  std::string resolve(const std::string& ref) const;
  // Lets other processes read the mirror while this one clones from it.
  void share() {
    if (lock_) lock_->share();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  void fetch(const std::vector<std::string>& refspecs, RemoteAccess& access);
  bool has_commit(const std::string& sha) const;

  RemoteUrl remote_;
  std::filesystem::path path_;
  bool temporary_;
  std::unique_ptr<FileLock> lock_;
  git_repository* repo_ = nullptr;
};

}  // namespace tp::git
