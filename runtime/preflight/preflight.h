// Preflight: what a run needs, checked before rendezvous so that a pod fails in seconds with a message
// saying what to fix, instead of after staging or in the middle of a collective. `trainpoint preflight`
// runs the checks alone; `trainpoint run` runs them first on every pod. docs/reliability.md lists the
// checks, their thresholds and exit classes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "dist/device_plan.h"
#include "dist/topology.h"
#include "git/checkout.h"
#include "spec/spec.h"

namespace tp::preflight {

// The spec as `run` would use it, and the directory its relative paths are taken from.
struct SpecInRepo {
  spec::Spec spec;
  std::filesystem::path root;
  std::string commit;  // empty for a local spec
};

struct Request {
  // The repository's URL, ref and access settings; an empty url means a local spec (no ref check).
  git::CheckoutRequest git;
  // Checks the repository out if needed and loads the spec; throws tp::Error as `run` would.
  std::function<SpecInRepo()> load_spec;
  std::filesystem::path workdir;
  int visible_gpus = 0;
  dist::EnvironmentLookup environment = dist::process_environment;
  // Whether the checkpoints in job.output are compared with this run (the "resume" check). `run` leaves it
  // to rank 0, which does it before its rendezvous.
  bool check_resume = true;
};

enum class Status { passed, failed, skipped };

struct CheckResult {
  std::string name;
  Status status = Status::skipped;
  std::string detail;  // what was found; for a failure, what is wrong and what to fix
  double seconds = 0;
  std::optional<ExitCode> code;  // failures only
};

struct Report {
  std::vector<CheckResult> checks;
  const CheckResult* first_failure() const;
};

// Runs every check (those that need a spec are skipped when it cannot be loaded) and logs one line each: a
// failure as a warning, the others at debug level (the table and run's summary line say what passed).
Report run(const Request& request);

// The report as an aligned table: check, status, seconds, detail.
std::string format_table(const Report& report);

// Throws the first failure as tp::Error of its exit class, naming the check; returns when all passed.
void throw_first_failure(const Report& report);

// The thresholds (docs/reliability.md).
inline constexpr std::uint64_t kWorkdirHeadroomBytes = 1ull << 30;  // free on the workdir's disk beyond the data
inline constexpr std::uint64_t kShmPerProcessBytes = 128ull << 20;  // /dev/shm per local process, NCCL or command mode

}  // namespace tp::preflight
