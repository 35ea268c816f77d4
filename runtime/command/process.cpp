#include "command/process.h"

#include <unistd.h>

#include <cerrno>

#include "common/child_process.h"

namespace tp::command {

ProcessResult run_process(const ProcessRequest& request) {
  ChildRequest child_request;
  child_request.program = request.program.string();
  child_request.arguments = request.arguments;
  child_request.environment = request.environment;
  child_request.output = ChildOutput::stdout_and_stderr_piped;
  child_request.stdin_from_null = true;
  const StartedChild child = start_child(child_request);
  if (child.pid < 0) return {127, child.failure};  // as a shell reports a program it cannot execute
  ProcessResult result;
  char buffer[8192];
  for (;;) {
    const ssize_t got = ::read(child.output, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    result.output.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(child.output);
  result.exit_code = wait_for_exit(child.pid);
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
