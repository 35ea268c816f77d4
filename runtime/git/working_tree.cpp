#include "git/working_tree.h"

#include <fmt/format.h>
#include <git2.h>

#include <memory>

#include "git/libgit2.h"

namespace tp::git {
namespace {

const char* describe_status(git_delta_t status) {
  switch (status) {
    case GIT_DELTA_ADDED: return "added";
    case GIT_DELTA_DELETED: return "deleted";
    case GIT_DELTA_RENAMED: return "renamed";
    case GIT_DELTA_UNTRACKED: return "untracked";
    case GIT_DELTA_TYPECHANGE: return "type changed";
    default: return "modified";
  }
}

}  // namespace

std::optional<std::vector<WorkingTreeChange>> working_tree_changes(const std::filesystem::path& working_tree,
                                                                   const std::string& commit) {
  init_libgit2();
  git_repository* opened = nullptr;
  if (git_repository_open_ext(&opened, working_tree.c_str(), GIT_REPOSITORY_OPEN_NO_SEARCH, nullptr) != 0) {
    return std::nullopt;
  }
  const std::unique_ptr<git_repository, void (*)(git_repository*)> repository(opened, git_repository_free);
  if (git_repository_is_bare(opened)) return std::nullopt;
  git_object* peeled = nullptr;
  if (git_revparse_single(&peeled, opened, (commit + "^{tree}").c_str()) != 0) return std::nullopt;
  const std::unique_ptr<git_object, void (*)(git_object*)> tree(peeled, git_object_free);

  git_diff_options options = GIT_DIFF_OPTIONS_INIT;
  options.flags = GIT_DIFF_INCLUDE_UNTRACKED | GIT_DIFF_IGNORE_SUBMODULES;
  git_diff* made = nullptr;
  if (git_diff_tree_to_workdir_with_index(&made, opened, reinterpret_cast<git_tree*>(peeled), &options) != 0) {
    return std::nullopt;
  }
  const std::unique_ptr<git_diff, void (*)(git_diff*)> diff(made, git_diff_free);
  std::vector<WorkingTreeChange> changes;
  for (std::size_t i = 0; i < git_diff_num_deltas(made); ++i) {
    const git_diff_delta* delta = git_diff_get_delta(made, i);
    const char* path = delta->status == GIT_DELTA_DELETED ? delta->old_file.path : delta->new_file.path;
    changes.push_back({path, describe_status(delta->status)});
  }
  return changes;
}

std::optional<std::filesystem::path> enclosing_working_tree(const std::filesystem::path& path) {
  init_libgit2();
  git_buf found = GIT_BUF_INIT;
  if (git_repository_discover(&found, path.c_str(), 0, nullptr) != 0) return std::nullopt;
  const std::string git_dir(found.ptr, found.size);
  git_buf_dispose(&found);
  git_repository* opened = nullptr;
  if (git_repository_open(&opened, git_dir.c_str()) != 0) return std::nullopt;
  const std::unique_ptr<git_repository, void (*)(git_repository*)> repository(opened, git_repository_free);
  const char* root = git_repository_workdir(opened);
  if (root == nullptr) return std::nullopt;
  std::string directory = root;
  if (directory.size() > 1 && directory.back() == '/') directory.pop_back();
  return std::filesystem::path(directory);
}

std::string describe_changes(const std::vector<WorkingTreeChange>& changes, std::size_t limit) {
  std::vector<std::string> named;
  for (std::size_t i = 0; i < changes.size() && i < limit; ++i) {
    named.push_back(fmt::format("{} ({})", changes[i].path, changes[i].what));
  }
  if (changes.size() > limit) named.push_back(fmt::format("and {} more", changes.size() - limit));
  return fmt::format("{}", fmt::join(named, ", "));
}

}  // namespace tp::git
