// How a local repository's working tree differs from a commit. `trainpoint run --repo PATH` trains what
// is committed: an edit not yet committed is not in the run, and the user is told which files differ.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tp::git {

struct WorkingTreeChange {
  std::string path;  // relative to the working tree's root; an untracked directory ends with '/'
  std::string what;  // "modified", "added", "deleted", "untracked", "renamed" or "type changed"
};

// The files where the working tree (with its index) of the repository at `working_tree` differs from
// `commit` (a SHA or any revision, such as "HEAD"): edits, staged or not, deletions and untracked files
// that are not ignored (an untracked directory as one entry). Submodules are left out.
// nullopt when `working_tree` is no repository with a working tree, or `commit` is not in it.
std::optional<std::vector<WorkingTreeChange>> working_tree_changes(const std::filesystem::path& working_tree,
                                                                   const std::string& commit);

// The root of the git working tree holding `path` (a file or directory), if any.
std::optional<std::filesystem::path> enclosing_working_tree(const std::filesystem::path& path);

// "a (modified), b/ (untracked)", at most `limit` entries, then "and N more".
std::string describe_changes(const std::vector<WorkingTreeChange>& changes, std::size_t limit = 8);

}  // namespace tp::git
