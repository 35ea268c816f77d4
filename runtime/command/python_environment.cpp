#include "command/python_environment.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <sstream>

#include "command/pip.h"
#include "command/process.h"
#include "command/program.h"
#include "common/digest.h"
#include "common/error.h"
#include "common/file_lock.h"
#include "common/files.h"
#include "common/log.h"

namespace tp::command {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Asks an interpreter what it is without importing torch (which takes seconds): the metadata is enough.
constexpr const char* kProbe = R"(import importlib.metadata, importlib.util, json, os, site, sys, sysconfig
try:
    torch = importlib.metadata.version("torch")
except Exception:
    torch = ""
in_venv = sys.prefix != sys.base_prefix
print(json.dumps({
    "version": "%d.%d.%d" % sys.version_info[:3],
    "torch": torch,
    "pip": importlib.util.find_spec("pip") is not None,
    "venv_site": [p for p in site.getsitepackages() if in_venv and p.startswith(sys.prefix) and os.path.isdir(p)],
    "system_site": not in_venv or any(not p.startswith(sys.prefix) for p in site.getsitepackages()),
    "purelib": sysconfig.get_path("purelib"),
}))
)";

// Written into an environment's site-packages when the base interpreter runs in a virtual environment:
// `site` runs it at start-up, adding the base environment's packages (and its own .pth files) after the
// environment's own, as they would come in the base.
constexpr const char* kBaseVenvPth = "_trainpoint_base_venv.pth";
constexpr const char* kCompleteMarker = ".trainpoint-complete";

std::string python_string(const std::string& text) { return nlohmann::json(text).dump(); }

// Builds the environment in `root` (which must not exist); returns the summary the marker keeps.
nlohmann::json build(const EnvironmentRequest& request, const Interpreter& base, const fs::path& root,
                     const std::string& requirements_text) {
  const auto started = Clock::now();
  check_torch_pins(requirements_text, request.requirements_name, base.torch_version);
  spdlog::info("python: building the environment for {} in {} over {}", request.requirements_name, root.string(),
               base.describe());
  // Over a virtual environment that does not see the system's packages (the torch wheel's venv, the gpu image's
  // /opt/venv), the environment must not see them either: --system-site-packages would add the system
  // interpreter's (Debian's torchvision built for its torch 1.13, its Pillow), which pip then takes as
  // installed. The base environment's own packages come through the .pth file below; pip too, or, when the base
  // has none, the environment's own (venv's ensurepip).
  std::vector<std::string> venv_arguments{"-m", "venv"};
  if (base.sees_system_site_packages) venv_arguments.push_back("--system-site-packages");
  if (base.sees_system_site_packages || base.has_pip) venv_arguments.push_back("--without-pip");
  venv_arguments.push_back(root.string());
  const ProcessResult made = run_process({base.executable, venv_arguments, {}});
  if (made.exit_code != 0) {
    for (const auto& line : last_lines(made.output, 6)) spdlog::warn("venv: {}", line);
    fail(ExitCode::requirements, "job.requirements {}: {} -m venv failed (exit {}): the image needs the venv module "
         "(Debian: python3-venv)", request.requirements_name, base.executable.string(), made.exit_code);
  }
  const fs::path python = root / "bin" / "python3";
  Interpreter layered = probe_interpreter(python);
  if (!base.venv_site_packages.empty()) {
    std::string lines;
    for (const auto& directory : base.venv_site_packages) {
      lines += fmt::format("import site; site.addsitedir({})\n", python_string(directory.string()));
    }
    write_file_atomic(layered.purelib / kBaseVenvPth, lines);
    layered = probe_interpreter(python);
  }
  if (!layered.has_pip) {
    fail(ExitCode::requirements, "job.requirements {}: pip is not installed for {}: the image needs it (Debian: "
         "python3-pip)", request.requirements_name, base.describe());
  }
  // The base's torch must be the one the environment sees (without one, the environment may still
  // see the system's, which pip must not replace either).
  if (!base.torch_version.empty() && layered.torch_version != base.torch_version) {
    fail(ExitCode::internal, "the environment {} sees torch '{}' but its base {} has '{}'", root.string(),
         layered.torch_version, base.executable.string(), base.torch_version);
  }
  PipInstall install{python, request.requirements, request.requirements_name, layered.torch_version, root,
                     request.environment};
  const std::vector<std::string> installed = pip_install(install);
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const std::string what = installed.empty() ? std::string("nothing to install (the image has every requirement)")
                                             : fmt::format("installed {} package(s): {}", installed.size(),
                                                           fmt::join(installed, ", "));
  spdlog::info("python: {}: {} in {:.1f}s", request.requirements_name, what, seconds);
  return {{"requirements", request.requirements_name}, {"installed", installed}, {"seconds", seconds},
          {"base", base.describe()}};
}

}  // namespace

std::string Interpreter::describe() const {
  return fmt::format("{} (Python {}, {})", executable.string(), version,
                     torch_version.empty() ? std::string("no torch") : "torch " + torch_version);
}

Interpreter probe_interpreter(const fs::path& python) {
  const ProcessResult result = run_process({python, {"-I", "-c", kProbe}, {}});
  Interpreter interpreter;
  interpreter.executable = python;
  try {
    if (result.exit_code != 0) throw std::runtime_error("exit code " + std::to_string(result.exit_code));
    const auto answer = nlohmann::json::parse(result.output.substr(result.output.rfind('{')));
    interpreter.version = answer.at("version").get<std::string>();
    interpreter.torch_version = answer.at("torch").get<std::string>();
    interpreter.has_pip = answer.at("pip").get<bool>();
    for (const auto& directory : answer.at("venv_site")) interpreter.venv_site_packages.push_back(directory.get<std::string>());
    interpreter.purelib = answer.at("purelib").get<std::string>();
    interpreter.sees_system_site_packages = answer.at("system_site").get<bool>();
  } catch (const std::exception& error) {
    fail(ExitCode::spec, "{} does not run as a Python 3.8 or later ({}): {}", python.string(), error.what(),
         fmt::join(last_lines(result.output, 3), " / "));
  }
  return interpreter;
}

fs::path base_interpreter(const std::vector<std::string>& command, const std::string& path_variable,
                          const fs::path& root) {
  const std::string name = !command.empty() && is_python(command[0]) ? command[0] : "python3";
  const auto found = find_program(name, path_variable, root);
  if (!found) {
    fail(ExitCode::spec, "job.requirements needs a Python interpreter, but '{}' is not in PATH ({})", name,
         path_variable);
  }
  return *found;
}

std::string read_requirements(const fs::path& file, const std::string& name) {
  std::error_code error;
  if (!fs::is_regular_file(file, error)) {
    fail(ExitCode::spec, "job.requirements: {} is not in the checkout ({}): commit it, or fix the path", name,
         file.string());
  }
  const std::string text = read_file(file, ExitCode::spec);
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    const std::string word = line.substr(start, line.find_first_of(" \t=", start) - start);
    if (word == "-e" || word == "--editable") {
      fail(ExitCode::spec, "{}:{}: '{}': an editable install points into one checkout, but the environment is "
           "shared by every commit with the same requirements: remove it (the program runs from the repository "
           "root, so the repository's own modules import without installing)", name, number, line.substr(start));
    }
  }
  return text;
}

fs::path environment_path(const fs::path& cache_dir, const Interpreter& base, const std::string& requirements_text) {
  std::error_code error;
  const fs::path real = fs::canonical(base.executable, error);
  // The format of this key's text changes only with the environments' layout.
  // A virtual environment's interpreter resolves to the system's: its own packages tell two apart.
  std::string venv_sites;
  for (const auto& directory : base.venv_site_packages) venv_sites += directory.string() + ":";
  const std::string key = fmt::format("trainpoint python environment 2\n{}\n{}\n{}\n{}\n{}\n{}\n",
                                      error ? base.executable.string() : real.string(), base.version,
                                      base.torch_version, venv_sites,
                                      base.sees_system_site_packages, requirements_text);
  return cache_dir / sha256_hex(key).substr(0, 16);
}

bool is_complete(const fs::path& environment) {
  std::error_code error;
  return fs::is_regular_file(environment / kCompleteMarker, error);
}

Environment prepare_environment(const EnvironmentRequest& request) {
  const std::string text = read_requirements(request.requirements, request.requirements_name);
  Environment environment;
  environment.base = probe_interpreter(request.python);
  environment.root = environment_path(request.cache_dir, environment.base, text);
  std::error_code error;
  fs::create_directories(request.cache_dir, error);
  if (error) {
    fail(ExitCode::storage, "cannot create the Python environment cache {}: {}", request.cache_dir.string(),
         error.message());
  }
  FileLock lock(environment.root.string() + ".lock", "building this Python environment");
  if (is_complete(environment.root)) {
    const auto summary = nlohmann::json::parse(read_file(environment.root / kCompleteMarker, ExitCode::storage),
                                               nullptr, false);
    const std::size_t count = summary.is_object() && summary.contains("installed") ? summary["installed"].size() : 0;
    spdlog::info("python: reusing the environment {} for {} ({} package(s) installed when it was built): pip not run",
                 environment.root.string(), request.requirements_name, count);
    environment.reused = true;
    return environment;
  }
  if (fs::exists(environment.root, error)) {
    spdlog::warn("python: {} is incomplete (an earlier build was interrupted or failed): building it again",
                 environment.root.string());
    fs::remove_all(environment.root, error);
    if (error) fail(ExitCode::storage, "cannot remove {}: {}", environment.root.string(), error.message());
  }
  const nlohmann::json summary = build(request, environment.base, environment.root, text);
  write_file_atomic(environment.root / kCompleteMarker, summary.dump(2) + "\n");
  return environment;
}

}  // namespace tp::command
