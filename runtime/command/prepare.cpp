#include "command/prepare.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>

#include "command/pip.h"
#include "command/program.h"
#include "command/python_environment.h"
#include "common/error.h"
#include "common/log.h"

namespace tp::command {
namespace {

namespace fs = std::filesystem;

// The program's PATH before the environment's bin/ goes first: job.env's, else trainpoint's own.
std::string program_path(const spec::JobSpec& job) {
  if (auto found = job.env.find("PATH"); found != job.env.end()) return found->second;
  const char* path = std::getenv("PATH");
  return path == nullptr ? "/usr/local/bin:/usr/bin:/bin" : path;
}

std::string with_bin_first(const fs::path& environment, const std::string& path) {
  return (environment / "bin").string() + ":" + path;
}

// What ran, for the start line and for failures: a Python interpreter describes itself (a python3
// without torch, such as a pyenv shim first in PATH, shows here).
// `known`: the interpreter when it is already known (an environment's is its base's).
std::string describe_program(const std::string& name, const fs::path& executable,
                             std::optional<Interpreter> known = std::nullopt) {
  const std::string prefix = name == executable.string() ? "" : name + " = ";
  if (!is_python(executable.string())) return prefix + executable.string();
  const Interpreter interpreter = known ? *known : probe_interpreter(executable);
  if (interpreter.torch_version.empty()) {
    spdlog::warn("command mode: {}{} has no torch: `import torch` will fail (name the interpreter that has it in "
                 "job.command, such as /usr/bin/python3)", prefix, executable.string());
  }
  return prefix + interpreter.describe();
}

[[noreturn]] void not_in_path(const std::string& name, const std::string& path) {
  fail(ExitCode::spec, "job.command: '{}' is not in PATH ({}): name the program by its path, or install it", name,
       path);
}

}  // namespace

fs::path environment_cache(const fs::path& git_cache, const fs::path& workdir) {
  return git_cache.empty() ? workdir / "cache" / "python" : git_cache / "python";
}

std::string preflight_program(const spec::JobSpec& job, const fs::path& root, const fs::path& cache_dir) {
  const std::string& name = job.command.front();
  const std::string path = program_path(job);
  std::vector<std::string> found;
  bool program_from_environment = false;
  if (!job.requirements.empty()) {
    const std::string text = read_requirements(root / job.requirements, job.requirements);
    const Interpreter base = probe_interpreter(base_interpreter(job.command, path, root));
    check_torch_pins(text, job.requirements, base.torch_version);
    const fs::path environment = environment_path(cache_dir, base, text);
    if (is_complete(environment)) {
      found.push_back(fmt::format("{}: environment {} is ready (no install)", job.requirements, environment.string()));
    } else {
      found.push_back(fmt::format("{}: environment {} will be built over {}", job.requirements, environment.string(),
                                  base.describe()));
      const std::string indexes = check_package_indexes(job.env);
      if (!indexes.empty()) found.push_back(indexes);
    }
    program_from_environment = is_python(name);
  }
  if (program_from_environment) {
    found.push_back(fmt::format("{}: the environment's", name));
  } else if (const auto executable = find_program(name, path, root)) {
    found.push_back(fmt::format("{} = {}", name, executable->string()));
  } else if (!job.requirements.empty()) {
    found.push_back(fmt::format("{}: not in PATH yet, looked for again after installing {}", name, job.requirements));
  } else {
    not_in_path(name, path);
  }
  check_script(job.command, root);
  if (const auto script = script_of(job.command)) found.push_back(fmt::format("{} is in the checkout", *script));
  return fmt::format("{}", fmt::join(found, "; "));
}

PreparedProgram prepare_program(const spec::JobSpec& job, const fs::path& root, const fs::path& cache_dir) {
  PreparedProgram program;
  program.environment = job.env;
  const std::string& name = job.command.front();
  std::string path = program_path(job);
  std::optional<Interpreter> environment_interpreter;
  if (!job.requirements.empty()) {
    const Environment environment = prepare_environment(
        {root / job.requirements, job.requirements, base_interpreter(job.command, path, root), cache_dir, job.env});
    path = with_bin_first(environment.root, path);
    program.environment["PATH"] = path;
    program.environment["VIRTUAL_ENV"] = environment.root.string();
    environment_interpreter = environment.base;
  }
  // The environment's own interpreter for "python3", "/usr/bin/python3" alike: its packages come with it.
  const bool environment_python = environment_interpreter && is_python(name);
  const auto executable = environment_python ? find_program(fs::path(name).filename().string(), path, root)
                                             : find_program(name, path, root);
  if (!executable) not_in_path(name, path);
  program.executable = *executable;
  check_script(job.command, root);
  if (environment_python) environment_interpreter->executable = program.executable;
  program.ran = describe_program(name, program.executable, environment_python ? environment_interpreter : std::nullopt);
  return program;
}

}  // namespace tp::command
