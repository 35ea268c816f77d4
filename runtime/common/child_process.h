// Starting a child process: the one fork+exec of trainpoint (the local launcher's workers in dist/worker_group.cpp,
// command mode's helpers in command/process.cpp). Everything the child needs is prepared before fork(): after
// fork() in a process with threads the child may call only async-signal-safe functions until it execs (setenv or
// malloc can deadlock on a lock another thread held), so its environment and argv are built before. The child
// dies with trainpoint, so that a SIGKILLed trainpoint (OOMKilled, a deleted pod) leaves no worker training or
// pip installing on its own, and starts with SIGTERM, SIGINT and SIGPIPE at their defaults whatever trainpoint
// does with them. A program that cannot be started (not found, not executable, its working directory missing)
// is told apart from one that ran and failed: the child reports the failed step and errno through a pipe that a
// successful exec closes.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tp {

// Where the child's stdout and stderr go.
enum class ChildOutput {
  inherited,        // trainpoint's own
  stderr_piped,     // stderr into a pipe the parent reads; stdout trainpoint's own
  stdout_and_stderr_piped,  // both into one pipe the parent reads
};

struct ChildRequest {
  // A path, or a name looked up in PATH as execvp does.
  std::string program;
  std::vector<std::string> arguments;  // argv without argv[0]
  std::string argv0;                   // empty: `program`
  // On top of this process's environment: a value sets a variable, nullopt removes it.
  std::map<std::string, std::optional<std::string>> environment;
  std::string working_directory;  // empty: this process's
  ChildOutput output = ChildOutput::inherited;
  bool stdin_from_null = false;  // so that no prompt can wait for an answer
};

// A child that started, or why it could not.
struct StartedChild {
  pid_t pid = -1;  // -1: it did not start, and `failure` says why
  // The read end of the piped output (close-on-exec), for the caller to read and close; -1 when not piped.
  int output = -1;
  // "cannot execute 'python3': No such file or directory", "cannot enter '/work/repo': Permission denied".
  std::string failure;
};

// Starts `request` from the calling thread, which must outlive the child (the death signal follows the forking
// thread). Throws tp::Error (internal) when a pipe or fork() fails. A child that did not start has been waited
// for: the caller waits only for a started one's pid.
StartedChild start_child(const ChildRequest& request);

// A wait status as one exit code: the exit status, or 128 + the signal that ended the process (as a shell says).
int exit_code_of(int wait_status);
// Waits until the started child `pid` has ended; its exit code as exit_code_of says.
int wait_for_exit(pid_t pid);

}  // namespace tp
