#include "git/parallel_checkout.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/cpu.h"
#include "common/error.h"
#include "common/files.h"
#include "common/tasks.h"
#include "git/libgit2.h"
#include "git/write_failure.h"

namespace tp::git {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxWriters = 8;

struct Entry {
  std::string path;  // relative to the working directory
  git_oid blob;
  git_filemode_t mode;
  struct stat written {};  // what the file system reports after writing, for the index
};

struct Tree {
  std::vector<std::string> directories;  // parents before children
  std::vector<Entry> files;              // regular files, executables and symbolic links
  bool needs_libgit2 = false;
};

// Names libgit2's checkout refuses or treats specially; left to it, so that it reports them.
bool refused_name(const char* name) {
  return std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0 || strcasecmp(name, ".git") == 0 ||
         strcasecmp(name, ".gitattributes") == 0 || std::strchr(name, '\\') != nullptr;
}

Tree list_tree(git_tree* tree) {
  Tree listed;
  const int walked = git_tree_walk(
      tree, GIT_TREEWALK_PRE,
      [](const char* root, const git_tree_entry* entry, void* payload) {
        auto& out = *static_cast<Tree*>(payload);
        const char* name = git_tree_entry_name(entry);
        if (refused_name(name)) {
          out.needs_libgit2 = true;
          return -1;  // stop the walk
        }
        std::string path = std::string(root) + name;
        const git_filemode_t mode = git_tree_entry_filemode(entry);
        switch (mode) {
          case GIT_FILEMODE_TREE:
          case GIT_FILEMODE_COMMIT:  // a submodule: an empty directory, filled by the submodule's checkout
            out.directories.push_back(std::move(path));
            break;
          case GIT_FILEMODE_BLOB:
          case GIT_FILEMODE_BLOB_EXECUTABLE:
          case GIT_FILEMODE_LINK:
            out.files.push_back({std::move(path), *git_tree_entry_id(entry), mode});
            break;
          case GIT_FILEMODE_UNREADABLE:
          default:  // a mode outside git's five
            out.needs_libgit2 = true;
            return -1;
        }
        return 0;
      },
      &listed);
  if (walked != 0) listed.needs_libgit2 = true;  // stopped above, or a tree unreadable: libgit2 reports it
  return listed;
}

// Whether `name` exists in one of libgit2's search directories for `level`, where it looks for attributes.
bool attributes_file_in(git_config_level_t level, const char* name) {
  git_buf dirs = GIT_BUF_INIT;
  bool found = false;
  if (git_libgit2_opts(GIT_OPT_GET_SEARCH_PATH, level, &dirs) == 0 && dirs.ptr != nullptr) {
    const std::string list = dirs.ptr;
    for (std::size_t start = 0; start <= list.size();) {
      const std::size_t end = std::min(list.find(GIT_PATH_LIST_SEPARATOR, start), list.size());
      if (end > start && fs::exists(fs::path(list.substr(start, end - start)) / name)) found = true;
      start = end + 1;
    }
  }
  git_buf_dispose(&dirs);
  return found;
}

// Configuration that changes what checkout writes (line endings, attributes, links as files).
bool configuration_needs_filters(git_repository* repo) {
  git_config* config = nullptr;
  if (git_repository_config_snapshot(&config, repo) != 0) return true;
  std::unique_ptr<git_config, void (*)(git_config*)> owned(config, git_config_free);
  for (const char* key : {"core.eol", "core.attributesfile"}) {
    git_config_entry* entry = nullptr;
    if (git_config_get_entry(&entry, config, key) == 0) {
      git_config_entry_free(entry);
      return true;
    }
  }
  int autocrlf = 0;  // true or "input" convert line endings; false, the default, does not
  const int autocrlf_status = git_config_get_bool(&autocrlf, config, "core.autocrlf");
  if (autocrlf_status != GIT_ENOTFOUND && (autocrlf_status != 0 || autocrlf)) return true;
  int symlinks = 1;
  if (git_config_get_bool(&symlinks, config, "core.symlinks") == 0 && !symlinks) return true;
  // Attributes outside the tree: the repository's own, the user's (XDG) and the system's.
  if (fs::exists(fs::path(git_repository_path(repo)) / "info" / "attributes")) return true;
  return attributes_file_in(GIT_CONFIG_LEVEL_XDG, "attributes") ||
         attributes_file_in(GIT_CONFIG_LEVEL_SYSTEM, "gitattributes");
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += written;
    size -= static_cast<std::size_t>(written);
  }
  return true;
}

// Writes one blob; throws (write_failed) what it could not write, with errno.
void write_entry(git_repository* repo, const fs::path& workdir, Entry& entry) {
  git_blob* blob = nullptr;
  if (git_blob_lookup(&blob, repo, &entry.blob) != 0) {
    write_failed("cannot read " + entry.path + " from the repository", libgit2_error());
  }
  std::unique_ptr<git_blob, void (*)(git_blob*)> owned(blob, git_blob_free);
  const auto* content = static_cast<const char*>(git_blob_rawcontent(blob));
  const auto size = static_cast<std::size_t>(git_blob_rawsize(blob));
  const fs::path path = workdir / entry.path;
  if (entry.mode == GIT_FILEMODE_LINK) {
    const std::string target(content, size);
    if (::symlink(target.c_str(), path.c_str()) != 0 || ::lstat(path.c_str(), &entry.written) != 0) {
      write_failed("cannot create the symbolic link " + path.string(), std::strerror(errno), errno);
    }
    return;
  }
  const mode_t permissions = entry.mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0777 : 0666;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, permissions);
  if (fd < 0) write_failed("cannot create " + path.string(), std::strerror(errno), errno);
  const bool written = write_all(fd, content, size) && ::fstat(fd, &entry.written) == 0;
  const int write_errno = errno;
  if (::close(fd) != 0 || !written) {
    const int cause = written ? errno : write_errno;
    write_failed("cannot write " + path.string(), std::strerror(cause), cause);
  }
}

// The files in runs that share a directory, as the tree walk lists them: [begin, end) of `files`.
std::vector<std::pair<std::size_t, std::size_t>> directory_runs(const std::vector<Entry>& files) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  const auto parent = [](const std::string& path) { return std::string_view(path).substr(0, path.rfind('/') + 1); };
  for (std::size_t begin = 0, end = 0; begin < files.size(); begin = end) {
    for (end = begin + 1; end < files.size() && parent(files[end].path) == parent(files[begin].path);) ++end;
    runs.emplace_back(begin, end);
  }
  return runs;
}

// One writer per usable core, each taking whole directories: writers creating files in the same directory
// wait for each other on its lock (on ext4 they spun there for most of their CPU time). Each writer opens
// the repository for itself: libgit2 objects are used by one thread at a time.
void write_files(const fs::path& repo_path, const fs::path& workdir, std::vector<Entry>& files) {
  const auto runs = directory_runs(files);
  const int writers = std::max(1, std::min({usable_cores(), kMaxWriters, static_cast<int>(runs.size())}));
  run_on_threads(runs.size(), writers, [&](TaskQueue& queue) {
    git_repository* raw = nullptr;
    if (git_repository_open(&raw, repo_path.c_str()) != 0) write_failed("cannot open " + repo_path.string(), libgit2_error());
    std::unique_ptr<git_repository, void (*)(git_repository*)> repo(raw, git_repository_free);
    queue.drain([&](std::size_t run) {
      for (std::size_t i = runs[run].first; i < runs[run].second; ++i) write_entry(repo.get(), workdir, files[i]);
    });
  });
  spdlog::debug("{}: {} files written by {} threads", workdir.string(), files.size(), writers);
}

// The index as checkout leaves it: the tree's entries with the stat data of the files just written.
void write_index(git_repository* repo, git_tree* tree, const std::vector<Entry>& files) {
  git_index* raw = nullptr;
  if (git_repository_index(&raw, repo) != 0) fail(ExitCode::output, "cannot open the index: {}", libgit2_error());
  std::unique_ptr<git_index, void (*)(git_index*)> index(raw, git_index_free);
  if (git_index_read_tree(index.get(), tree) != 0) fail(ExitCode::output, "cannot fill the index: {}", libgit2_error());
  for (const Entry& file : files) {
    const git_index_entry* listed = git_index_get_bypath(index.get(), file.path.c_str(), 0);
    if (listed == nullptr) continue;
    git_index_entry entry = *listed;
    const struct stat& st = file.written;
    entry.ctime.seconds = static_cast<std::int32_t>(st.st_ctim.tv_sec);
    entry.ctime.nanoseconds = static_cast<std::uint32_t>(st.st_ctim.tv_nsec);
    entry.mtime.seconds = static_cast<std::int32_t>(st.st_mtim.tv_sec);
    entry.mtime.nanoseconds = static_cast<std::uint32_t>(st.st_mtim.tv_nsec);
    entry.dev = static_cast<std::uint32_t>(st.st_dev);
    entry.ino = static_cast<std::uint32_t>(st.st_ino);
    entry.uid = st.st_uid;
    entry.gid = st.st_gid;
    entry.file_size = static_cast<std::uint32_t>(st.st_size);
    if (git_index_add(index.get(), &entry) != 0) fail(ExitCode::output, "cannot fill the index: {}", libgit2_error());
  }
  if (git_index_write(index.get()) != 0) {
    fail(ExitCode::output, "cannot write the index: {}", libgit2_error());
  }
}

}  // namespace

bool checkout_in_parallel(git_repository* repo, git_commit* commit) {
  git_tree* raw_tree = nullptr;
  if (git_commit_tree(&raw_tree, commit) != 0) return false;
  std::unique_ptr<git_tree, void (*)(git_tree*)> tree(raw_tree, git_tree_free);
  Tree listed = list_tree(tree.get());
  if (listed.needs_libgit2 || configuration_needs_filters(repo)) return false;

  const fs::path workdir = git_repository_workdir(repo);
  for (const std::string& directory : listed.directories) {
    const fs::path path = workdir / directory;
    if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
      fail(write_failure_class(errno), "cannot create {}: {}", path.string(), std::strerror(errno));
    }
  }
  write_files(git_repository_path(repo), workdir, listed.files);
  write_index(repo, tree.get(), listed.files);
  return true;
}

}  // namespace tp::git
