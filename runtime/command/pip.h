// pip as the platform configures it: PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST, PIP_CERT and
// pip.conf are read by pip itself (trainpoint passes no index options), stdin is closed so nothing can
// prompt, and its failures become trainpoint's exit classes. Index credentials (user:token@) are
// never logged.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tp::command {

struct PipInstall {
  std::filesystem::path python;        // the environment's interpreter
  std::filesystem::path requirements;  // the file to install
  std::string requirements_name;       // as job.requirements names it
  std::string image_torch;             // the image's torch version: pip may not replace it (empty: none)
  std::filesystem::path work_dir;      // where the constraints file and pip's log are written
  std::map<std::string, std::string> environment;  // added to pip's (job.env)
};

// Installs the requirements; returns what was installed, as "name version". Throws tp::Error:
// requirements (no such package or version, a package that does not build, a requirement that would
// replace the image's torch: refused before anything is installed, as pip resolves first), network
// (an index that does not answer: retryable), storage (disk full). pip's last lines are logged.
std::vector<std::string> pip_install(const PipInstall& request);

// Refuses, without asking pip (so also offline), a requirement line pinning torch with == to another
// version than the image's `image_torch` (the platform's old notebooks pin torch==1.4.0): tp::Error
// (requirements). Other specifiers and transitive pins are pip's to refuse, in pip_install.
void check_torch_pins(const std::string& requirements_text, const std::string& name, const std::string& image_torch);

// The package indexes PIP_INDEX_URL and PIP_EXTRA_INDEX_URL name (in `environment`, then this process's):
// each must answer over HTTP. Returns what was found ("" when none is configured: pip.conf's indexes are
// checked by pip itself). Throws tp::Error: network (no answer, or HTTP 5xx), requirements (401/403).
std::string check_package_indexes(const std::map<std::string, std::string>& environment);

// `text` with the password of every URL in it replaced by ***.
std::string redact_urls(const std::string& text);

}  // namespace tp::command
