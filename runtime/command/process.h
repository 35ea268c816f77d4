// Running a helper program (python, pip) to completion with its output captured: the child dies with
// trainpoint (a killed trainpoint leaves no pip writing into an environment another run rebuilds).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tp::command {

struct ProcessRequest {
  std::filesystem::path program;   // a path, or a name looked up in PATH
  std::vector<std::string> arguments;
  // On top of this process's environment: a value sets a variable, nullopt removes it.
  std::map<std::string, std::optional<std::string>> environment;
};

struct ProcessResult {
  int exit_code = 0;   // the exit status, or 128 + the signal that ended it
  std::string output;  // stdout and stderr together
};

// Throws tp::Error (internal) only when the process cannot be started at all; an exec failure is an
// exit code of 127 with the cause in the output, as a shell reports it.
ProcessResult run_process(const ProcessRequest& request);

// The last `count` non-empty lines of `text`, for messages about a failed tool.
std::vector<std::string> last_lines(const std::string& text, std::size_t count);

}  // namespace tp::command
