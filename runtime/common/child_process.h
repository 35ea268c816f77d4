// What a child that trainpoint forks needs, prepared before fork(). After fork() in a process with threads
// the child may call only async-signal-safe functions until it execs (setenv or malloc can deadlock on a lock
// another thread held), so its environment is built before; and the child dies with trainpoint, so that a
// SIGKILLed trainpoint (OOMKilled, a deleted pod) leaves no worker training or pip installing on its own.
// Used by the local launcher (dist/launcher.cpp) and command mode's helpers (command/process.cpp).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tp {

// This process's environment with `changes` applied (a value sets a variable, nullopt removes it), as the
// envp that execve() takes.
class ChildEnvironment {
 public:
  explicit ChildEnvironment(const std::map<std::string, std::optional<std::string>>& changes);
  ChildEnvironment(const ChildEnvironment&) = delete;
  ChildEnvironment& operator=(const ChildEnvironment&) = delete;
  char** envp() { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

// In the child, first thing after fork(): it gets SIGKILL when `parent` (getpid() before the fork) ends, and
// ends at once (exit 137) if that happened before this call. The parent must fork from a thread that outlives
// the child: the signal follows the forking thread.
void die_with_parent(pid_t parent);

}  // namespace tp
