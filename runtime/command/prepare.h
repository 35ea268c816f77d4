// Command mode before its workers start: the preflight's view of the program and its requirements, and
// the program ready to launch (its Python environment built or reused, its executable resolved).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "spec/spec.h"

namespace tp::command {

// Where a node keeps Python environments: beside the git mirrors in the node's git cache (shared by the
// node's pods, /scratch/git-cache/python in render-job's manifests), else under the work directory.
std::filesystem::path environment_cache(const std::filesystem::path& git_cache, const std::filesystem::path& workdir);

// The preflight check: job.requirements is in the checkout, whether its environment is ready or must be
// built (then the configured package indexes must answer), the program resolves in PATH (after the
// environment's bin/) and its script is in the checkout. Returns what it found; throws tp::Error.
std::string preflight_program(const spec::JobSpec& job, const std::filesystem::path& root,
                              const std::filesystem::path& cache_dir);

struct PreparedProgram {
  std::filesystem::path executable;                 // what each worker executes
  std::map<std::string, std::string> environment;   // job.env, and PATH and VIRTUAL_ENV for the environment
  std::string ran;                                  // "python3 = /x/bin/python3 (Python 3.11.2, torch 1.13.1)"
};

// Builds or reuses the environment, resolves the program and checks its script. Throws tp::Error.
PreparedProgram prepare_program(const spec::JobSpec& job, const std::filesystem::path& root,
                                const std::filesystem::path& cache_dir);

}  // namespace tp::command
