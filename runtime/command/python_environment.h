// Command mode's Python environment (job.requirements): a virtual environment made with
// --system-site-packages over the image's interpreter, so the program imports the image's PyTorch (and the
// LibTorch and NCCL trainpoint shares with it) and the packages the requirements add. Environments are
// node-local and shared: keyed by a digest of the requirements file, the interpreter, its Python version
// and its torch version, built by one process under a file lock that the node's ranks and pods share,
// and marked complete only after pip succeeded, so an interrupted build is rebuilt and a complete one is
// reused without running pip. docs/guide.md ("Your own PyTorch or fastai script") tells the user's side.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tp::command {

// A Python interpreter as it describes itself.
struct Interpreter {
  std::filesystem::path executable;
  std::string version;        // such as 3.11.2
  std::string torch_version;  // empty: torch is not installed for it
  bool has_pip = false;
  // When it runs in a virtual environment (the gpu image's /opt/venv): that environment's site-packages,
  // which an environment built over it must see too (a venv's --system-site-packages reaches only the
  // system's). Empty for a system interpreter.
  std::vector<std::filesystem::path> venv_site_packages;
  std::filesystem::path purelib;  // where packages installed for it go
  // Whether it sees the system interpreter's site-packages: a system interpreter does, a virtual environment
  // only when made with --system-site-packages. An environment built over it sees them exactly when it does.
  bool sees_system_site_packages = true;

  // "/usr/bin/python3 (Python 3.11.2, torch 1.13.1)", for logs and messages.
  std::string describe() const;
};

// Runs `python` once to ask. Throws tp::Error (spec) when it does not run.
Interpreter probe_interpreter(const std::filesystem::path& python);

// The interpreter command mode builds the environment over: the command's own when it runs one
// (job.command = ["/usr/bin/python3", ...]), else python3 from `path_variable`. Throws tp::Error (spec).
std::filesystem::path base_interpreter(const std::vector<std::string>& command, const std::string& path_variable,
                                       const std::filesystem::path& root);

struct EnvironmentRequest {
  std::filesystem::path requirements;  // the file in the checkout
  std::string requirements_name;       // job.requirements as written, for messages
  std::filesystem::path python;        // the base interpreter (base_interpreter)
  std::filesystem::path cache_dir;     // node-local directory of environments
  // job.env: pip runs with it too (an index URL without a secret may be set there).
  std::map<std::string, std::string> environment;
};

struct Environment {
  std::filesystem::path root;  // the virtual environment; its bin/ goes first in the program's PATH
  Interpreter base;
  bool reused = false;
};

// Checks the requirements file as the checkout holds it: it exists, and has no editable install (an
// environment outlives the checkout it was built from). Throws tp::Error (spec) naming file and line.
// Returns its text.
std::string read_requirements(const std::filesystem::path& file, const std::string& name);

// The directory the environment for these requirements and this interpreter has under `cache_dir`.
std::filesystem::path environment_path(const std::filesystem::path& cache_dir, const Interpreter& base,
                                       const std::string& requirements_text);
// Whether a complete environment is there (a build that was interrupted is not).
bool is_complete(const std::filesystem::path& environment);

// Reuses the complete environment or builds it (waiting while another process of the node builds it).
// Throws tp::Error: requirements (a package missing, not building, or replacing the image's torch;
// pip's last lines are logged), network (the index did not answer: retryable), storage (disk full).
Environment prepare_environment(const EnvironmentRequest& request);

}  // namespace tp::command
