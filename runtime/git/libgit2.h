// Process-wide libgit2 setup and its error text.
#pragma once

#include <string>

namespace tp::git {

// Initializes libgit2 once per process (thread-safe); every entry point that calls libgit2 calls it.
void init_libgit2();
// The last libgit2 error message on this thread.
std::string libgit2_error();

}  // namespace tp::git
