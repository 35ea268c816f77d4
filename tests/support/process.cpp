#include "support/process.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace tp::testing {

CommandResult run_command(const std::string& command) {
  const std::string wrapped = command + " 2>&1";
  FILE* pipe = ::popen(wrapped.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::string output;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, output};
}

std::string run_checked(const std::string& command) {
  CommandResult result = run_command(command);
  if (result.exit_code != 0) {
    throw std::runtime_error("command failed (" + std::to_string(result.exit_code) + "): " + command + "\n" +
                             result.output);
  }
  return result.output;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string trainpoint_binary() { return TP_TRAINPOINT_BIN; }

std::string tools_python() {
  if (const char* set = std::getenv("TRAINPOINT_PYTHON_TOOLS"); set && *set) return set;
  const char* cache = std::getenv("TRAINPOINT_CACHE");
  return std::string(cache && *cache ? cache : "/var/cache/trainpoint") + "/python-tools/venv/bin/python3";
}

std::string source_dir() { return TP_SOURCE_DIR; }

CommandResult run_spec_in(const std::filesystem::path& dir, const std::string& extra) {
  return run_command(trainpoint_binary() + " run --spec " + shell_quote((dir / "train.toml").string()) +
                     " --workdir " + shell_quote(dir.string()) + extra);
}

}  // namespace tp::testing
