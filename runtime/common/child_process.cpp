#include "common/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/error.h"

extern char** environ;

namespace tp {
namespace {

// Strings as the null-terminated array of pointers that execve() takes for argv and envp.
class ExecStrings {
 public:
  explicit ExecStrings(std::vector<std::string> texts) : texts_(std::move(texts)) {
    for (auto& text : texts_) pointers_.push_back(text.data());
    pointers_.push_back(nullptr);
  }
  ExecStrings(const ExecStrings&) = delete;
  ExecStrings& operator=(const ExecStrings&) = delete;
  char** get() { return pointers_.data(); }

 private:
  std::vector<std::string> texts_;
  std::vector<char*> pointers_;
};

// This process's environment with `changes` applied (a value sets a variable, nullopt removes it), as NAME=value.
std::vector<std::string> environment_with(const std::map<std::string, std::optional<std::string>>& changes) {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto equals = text.find('=');
    if (equals != std::string::npos) variables[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [name, value] : changes) {
    if (value) {
      variables[name] = *value;
    } else {
      variables.erase(name);
    }
  }
  std::vector<std::string> entries;
  for (const auto& [name, value] : variables) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<std::string> argv_of(const ChildRequest& request) {
  std::vector<std::string> argv{request.argv0.empty() ? request.program : request.argv0};
  argv.insert(argv.end(), request.arguments.begin(), request.arguments.end());
  return argv;
}

// The step at which a child could not go on, and errno there: what it writes to the report pipe.
enum class FailedStep : int { enter_directory, execute };
struct ChildFailure {
  FailedStep step;
  int error;
};

struct Pipe {
  int read = -1;
  int write = -1;
};

Pipe make_pipe(const ChildRequest& request) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    fail(ExitCode::internal, "cannot start {}: pipe failed: {}", request.program, std::strerror(errno));
  }
  return {ends[0], ends[1]};
}

void close_if_open(int fd) {
  if (fd >= 0) ::close(fd);
}

// In the child, first thing after fork(): it gets SIGKILL when `parent` (getpid() before the fork) ends, and
// ends at once (exit 137) if that happened before this call.
void die_with_parent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) std::_Exit(137);
}

[[noreturn]] void report_and_exit(int report, FailedStep step) {
  const ChildFailure failure{step, errno};
  [[maybe_unused]] const auto written = ::write(report, &failure, sizeof failure);
  std::_Exit(127);
}

void redirect_streams(const ChildRequest& request, int output) {
  if (request.stdin_from_null) {
    const int null = ::open("/dev/null", O_RDONLY);
    if (null > STDIN_FILENO) {
      ::dup2(null, STDIN_FILENO);
      ::close(null);
    }
  }
  // dup2 clears O_CLOEXEC on the copy: the program keeps it.
  if (request.output == ChildOutput::stdout_and_stderr_piped) ::dup2(output, STDOUT_FILENO);
  if (output >= 0) ::dup2(output, STDERR_FILENO);
}

// The child between fork() and exec: async-signal-safe calls only. glibc's execvpe allocates nothing (its PATH
// search uses the stack; posix_spawnp runs the same code in a vfork child).
[[noreturn]] void become_program(const ChildRequest& request, char** argv, char** envp, pid_t parent, int report,
                                 int output) {
  die_with_parent(parent);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);  // trainpoint ignores it (common/signals.h); a shell pipeline expects the default
  redirect_streams(request, output);
  if (!request.working_directory.empty() && ::chdir(request.working_directory.c_str()) != 0) {
    report_and_exit(report, FailedStep::enter_directory);
  }
  ::execvpe(request.program.c_str(), argv, envp);
  report_and_exit(report, FailedStep::execute);
}

// What the child reported before it exec'd, if anything: a successful exec closes the report pipe unwritten.
std::optional<ChildFailure> read_report(int report) {
  ChildFailure failure{};
  ssize_t got = 0;
  do {
    got = ::read(report, &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof failure)) return std::nullopt;
  return failure;
}

std::string describe(const ChildRequest& request, const ChildFailure& failure) {
  if (failure.step == FailedStep::enter_directory) {
    return fmt::format("cannot enter '{}': {}", request.working_directory, std::strerror(failure.error));
  }
  return fmt::format("cannot execute '{}': {}", request.program, std::strerror(failure.error));
}

}  // namespace

StartedChild start_child(const ChildRequest& request) {
  ExecStrings environment(environment_with(request.environment));
  ExecStrings argv(argv_of(request));
  const Pipe report = make_pipe(request);
  const Pipe output = request.output == ChildOutput::inherited ? Pipe{} : make_pipe(request);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) become_program(request, argv.get(), environment.get(), parent, report.write, output.write);
  const int fork_error = errno;
  ::close(report.write);
  close_if_open(output.write);
  if (pid < 0) {
    ::close(report.read);
    close_if_open(output.read);
    fail(ExitCode::internal, "cannot start {}: fork failed: {}", request.program, std::strerror(fork_error));
  }
  const std::optional<ChildFailure> failure = read_report(report.read);
  ::close(report.read);
  if (!failure) return {pid, output.read, ""};
  wait_for_exit(pid);
  close_if_open(output.read);
  return {-1, -1, describe(request, *failure)};
}

int exit_code_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

int wait_for_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return exit_code_of(status);
}

}  // namespace tp
