#include "git/libgit2.h"

#include <git2.h>

namespace tp::git {

void init_libgit2() {
  struct Library {
    Library() { git_libgit2_init(); }
    ~Library() { git_libgit2_shutdown(); }
  };
  static Library library;
}

std::string libgit2_error() {
  const git_error* error = git_error_last();
  return error != nullptr && error->message != nullptr ? error->message : "unknown libgit2 error";
}

}  // namespace tp::git
