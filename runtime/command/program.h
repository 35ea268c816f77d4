// Command mode's program ([job] command): where its executable and script are, checked before any
// rendezvous, and how its exit becomes one of trainpoint's documented exit classes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dist/launcher.h"

namespace tp::command {

// Where `name` is found as execvp would: `name` itself when it holds a '/' (relative to
// `working_directory`), else the first executable file of that name in `path_variable`.
std::optional<std::filesystem::path> find_program(const std::string& name, const std::string& path_variable,
                                                  const std::filesystem::path& working_directory);

// python, python3, python3.11...: a program that runs a script with a Python interpreter.
bool is_python(const std::string& program);

// The file a command runs from the checkout, if it names one: a Python interpreter's script (none with
// -c or -m), a shell's (none with -c), or the program itself when it is a relative path (./train.sh).
std::optional<std::string> script_of(const std::vector<std::string>& command);

// Throws tp::Error (spec) naming `job.command` when the command's script is not in the checkout at `root`.
void check_script(const std::vector<std::string>& command, const std::filesystem::path& root);

// Why a failed worker failed, in its own words: the exception torch's @record wrote to its
// TORCHELASTIC_ERROR_FILE ("ValueError: bad label 7 (train.py:42)", the file relative to the checkout at
// `root` when it is in it), else its last lines of stderr; empty when it left neither.
std::string failure_cause(const dist::WorkersResult& result, const std::filesystem::path& root);

// Returns when every worker succeeded; otherwise throws the failure in trainpoint's classes, naming the
// first failed rank, the program's own exit code, `ran` (which executable ran, for example "python3 =
// /usr/bin/python3 (Python 3.11.2, torch 1.13.1)") and `cause` (failure_cause): interrupted when SIGTERM or
// SIGINT reached trainpoint, program (permanent) for codes 1-127, program_retryable for 128-255 and for a
// signal (SIGKILL: the out-of-memory killer).
void check_workers(const dist::WorkersResult& result, const std::vector<std::string>& command, const std::string& ran,
                   const std::string& cause);

}  // namespace tp::command
