// A checkout into an empty working directory that writes the files on several threads.
//
// libgit2's git_checkout_tree writes one file at a time and, per file, resolves the path three times with
// realpath() and stats it about ten times (docs/benchmarks.md, "Where the git checkout's time goes"); git's
// own checkout writes in parallel with two stats per file. This writes each blob with open, write, fstat and
// close, on several threads, then the index with the stat data it saw, so `git status` in the checkout is
// clean without reading the files again.
#pragma once

#include <git2.h>

namespace tp::git {

// Checks out `commit` into `repo`'s (empty) working directory as git_checkout_tree with GIT_CHECKOUT_FORCE
// would: regular and executable files (0666/0777 less the umask), symbolic links, empty directories for
// submodules, and the index. Returns true when it did, which also says that no attribute applies to any file
// (so none is an LFS pointer). Returns false, having written nothing, when libgit2's own checkout must do it:
// the tree or the configuration asks for checkout filters (a .gitattributes file, an attributes file,
// core.autocrlf, core.eol), symbolic links are off (core.symlinks), or a path is one that libgit2 refuses
// (.git, "..") so that its error is the one reported. Throws tp::Error (ExitCode::storage when the disk is
// full, ExitCode::output otherwise) when a file cannot be written.
bool checkout_in_parallel(git_repository* repo, git_commit* commit);

}  // namespace tp::git
