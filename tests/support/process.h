// Running commands from tests: a shell command with its output captured, and its exit status.
#pragma once

#include <filesystem>
#include <string>

namespace tp::testing {

struct CommandResult {
  int exit_code;       // the process's exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh and captures everything it prints.
CommandResult run_command(const std::string& command);
// Runs a command and throws std::runtime_error with its output when it fails.
std::string run_checked(const std::string& command);
// Quotes a string for the shell.
std::string shell_quote(const std::string& text);
// The trainpoint binary under test, built beside the tests.
std::string trainpoint_binary();
// The python3 of scripts/install-python-tools (tensorboard, mlflow, scikit-learn, webdataset):
// $TRAINPOINT_PYTHON_TOOLS, else the venv in $TRAINPOINT_CACHE (default /var/cache/trainpoint), as the script
// makes it.
std::string tools_python();
// The project's source directory.
std::string source_dir();
// `trainpoint run` of DIR/train.toml with DIR as its work directory, and `extra` arguments after them.
CommandResult run_spec_in(const std::filesystem::path& dir, const std::string& extra = "");

}  // namespace tp::testing
