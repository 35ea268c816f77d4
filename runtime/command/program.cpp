#include "command/program.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/error.h"

namespace tp::command {

namespace fs = std::filesystem;

std::optional<fs::path> find_program(const std::string& name, const std::string& path_variable,
                                     const fs::path& working_directory) {
  auto executable = [](const fs::path& file) {
    std::error_code error;
    return fs::is_regular_file(file, error) && ::access(file.c_str(), X_OK) == 0;
  };
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    const fs::path file = (working_directory / name).lexically_normal();
    if (executable(file)) return file;
    return std::nullopt;
  }
  std::size_t start = 0;
  while (start <= path_variable.size()) {
    const std::size_t end = std::min(path_variable.find(':', start), path_variable.size());
    // An empty entry is the current directory, as execvp takes it.
    const fs::path directory = end == start ? working_directory : fs::path(path_variable.substr(start, end - start));
    if (executable(directory / name)) return directory / name;
    start = end + 1;
  }
  return std::nullopt;
}

bool is_python(const std::string& program) {
  static const std::regex kPython(R"(python(\d+(\.\d+)?)?)");
  return std::regex_match(fs::path(program).filename().string(), kPython);
}

std::optional<std::string> script_of(const std::vector<std::string>& command) {
  if (command.empty()) return std::nullopt;
  const std::string program = fs::path(command[0]).filename().string();
  const bool python = is_python(command[0]);
  const bool shell = program == "sh" || program == "bash" || program == "dash";
  if (!python && !shell) {
    // ./train.sh or scripts/run: a file of the checkout.
    if (command[0].find('/') != std::string::npos && command[0].front() != '/') return command[0];
    return std::nullopt;
  }
  for (std::size_t i = 1; i < command.size(); ++i) {
    const std::string& argument = command[i];
    if (argument == "-c" || (python && argument == "-m")) return std::nullopt;  // no file to check
    if (argument == "-") return std::nullopt;                                    // stdin
    if (python && (argument == "-X" || argument == "-W")) {
      ++i;  // these options take a value
      continue;
    }
    if (argument.size() > 1 && argument[0] == '-') continue;
    return argument;
  }
  return std::nullopt;
}

void check_script(const std::vector<std::string>& command, const fs::path& root) {
  const auto script = script_of(command);
  if (!script || fs::path(*script).is_absolute()) return;
  std::error_code error;
  if (fs::is_regular_file(root / *script, error)) return;
  fail(ExitCode::spec, "job.command: '{}' runs {}, which is not in the checkout ({}): commit it, or fix the path "
       "(the program runs from the repository root)", fmt::join(command, " "), *script, root.string());
}

namespace {

// The last frame of a Python traceback, "train.py:42", the file relative to `root` when it is in it.
std::string innermost_frame(const std::string& traceback, const fs::path& root) {
  static const std::regex kFrame(R"re(File "([^"]+)", line (\d+))re");
  std::string file, line;
  for (auto match = std::sregex_iterator(traceback.begin(), traceback.end(), kFrame); match != std::sregex_iterator();
       ++match) {
    file = (*match)[1];
    line = (*match)[2];
  }
  if (file.empty()) return "";
  const fs::path relative = fs::path(file).lexically_relative(root);
  if (!relative.empty() && *relative.begin() != "..") file = relative.string();
  return fmt::format("{}:{}", file, line);
}

// torch.distributed.elastic's error file: {"message": {"message": "ValueError: ...", "extraInfo":
// {"py_callstack": "Traceback ...", "timestamp": "..."}}}; some writers put a plain string in "message".
std::string recorded_exception(const std::string& error_file, const fs::path& root) {
  std::ifstream in(error_file);
  if (!in) return "";
  const nlohmann::json document = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!document.is_object() || !document.contains("message")) return "";
  const nlohmann::json& message = document["message"];
  if (message.is_string()) return message.get<std::string>();
  if (!message.is_object() || !message.contains("message") || !message["message"].is_string()) return "";
  std::string text = message["message"].get<std::string>();
  const auto* callstack = message.contains("extraInfo") && message["extraInfo"].is_object() &&
                                  message["extraInfo"].contains("py_callstack") &&
                                  message["extraInfo"]["py_callstack"].is_string()
                              ? &message["extraInfo"]["py_callstack"]
                              : nullptr;
  const std::string frame = callstack == nullptr ? "" : innermost_frame(callstack->get<std::string>(), root);
  return frame.empty() ? text : fmt::format("{} ({})", text, frame);
}

}  // namespace

std::string failure_cause(const dist::WorkersResult& result, const fs::path& root) {
  if (!result.error_file.empty()) {
    std::string recorded = recorded_exception(result.error_file, root);
    if (!recorded.empty()) return recorded;
  }
  if (result.stderr_tail.empty()) return "";
  return fmt::format("its last lines of stderr:\n  {}", fmt::join(result.stderr_tail, "\n  "));
}

void check_workers(const dist::WorkersResult& result, const std::vector<std::string>& command, const std::string& ran,
                   const std::string& cause) {
  const std::string what = fmt::format("'{}' ({})", fmt::join(command, " "), ran);
  const std::string worker = fmt::format("rank {} (worker {} of this node)", result.rank, result.local_rank);
  const std::string because = cause.empty() ? "" : fmt::format(": {}", cause);
  if (result.interrupted) {
    fail(ExitCode::interrupted, "stopped by SIGTERM/SIGINT: {} was asked to stop{}", what,
         result.code == 0 ? "" : fmt::format(" ({} exited with code {})", worker, result.code));
  }
  if (result.code == 0) return;
  if (result.signal != 0) {
    const char* name = sigabbrev_np(result.signal);
    fail(ExitCode::program_retryable, "{}: {} was ended by signal {} (SIG{}{}): a restart may succeed{}", worker,
         what, result.signal, name == nullptr ? "?" : name,
         result.signal == 9 ? ": out of memory, or killed from outside" : "", because);
  }
  if (result.code >= 128) {
    fail(ExitCode::program_retryable, "{}: {} exited with code {}, which asks for a retry (128-255){}", worker, what,
         result.code, because);
  }
  fail(ExitCode::program, "{}: {} exited with code {} (the program's own code){}", worker, what, result.code,
       cause.empty() ? ": its output above says why" : because);
}

}  // namespace tp::command
