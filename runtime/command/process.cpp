#include "command/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/child_process.h"
#include "common/error.h"

namespace tp::command {

ProcessResult run_process(const ProcessRequest& request) {
  ChildEnvironment environment(request.environment);
  std::vector<std::string> argv{request.program.string()};
  argv.insert(argv.end(), request.arguments.begin(), request.arguments.end());
  std::vector<char*> raw;
  for (auto& argument : argv) raw.push_back(argument.data());
  raw.push_back(nullptr);

  int output[2];
  if (::pipe2(output, O_CLOEXEC) != 0) {
    fail(ExitCode::internal, "cannot start {}: pipe failed: {}", request.program.string(), std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) fail(ExitCode::internal, "cannot start {}: fork failed: {}", request.program.string(), std::strerror(errno));
  if (pid == 0) {
    die_with_parent(parent);
    ::signal(SIGPIPE, SIG_DFL);
    const int null = ::open("/dev/null", O_RDONLY);  // no prompt can wait for an answer
    ::dup2(null, STDIN_FILENO);
    ::dup2(output[1], STDOUT_FILENO);
    ::dup2(output[1], STDERR_FILENO);
    ::execve(raw[0], raw.data(), environment.envp());
    const char* cause = std::strerror(errno);
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, "cannot execute: ", 16);
    ignored = ::write(STDERR_FILENO, cause, std::strlen(cause));
    std::_Exit(127);
  }
  ::close(output[1]);
  ProcessResult result;
  char buffer[8192];
  for (;;) {
    const ssize_t got = ::read(output[0], buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    result.output.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(output[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::vector<std::string> last_lines(const std::string& text, std::size_t count) {
  std::vector<std::string> lines;
  std::size_t end = text.size();
  while (lines.size() < count && end > 0) {
    const std::size_t start = text.rfind('\n', end - 1);
    const std::size_t begin = start == std::string::npos ? 0 : start + 1;
    const std::string line = text.substr(begin, end - begin);
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.insert(lines.begin(), line);
    if (start == std::string::npos) break;
    end = start;
  }
  return lines;
}

}  // namespace tp::command
