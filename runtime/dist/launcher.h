// The local launcher: one worker process per GPU (or as dist.nproc_per_node says), each this same
// binary with torchrun's variables, so the node clones and stages once and the workers train.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dist/topology.h"
#include "dist/worker_group.h"

namespace tp::dist {

struct WorkerLaunch {
  // The program each worker runs, looked up in PATH like a shell does; empty: this binary is re-executed.
  std::string program;
  std::vector<std::string> arguments;  // argv of each worker, without argv[0]
  std::string working_directory;       // empty: the launcher's own
  Topology topology;
  // Added to each worker's environment; a name given here wins over worker_environment's.
  std::map<std::string, std::string> environment;
  int stop_grace_seconds = 30;  // after SIGTERM, how long workers get to save a checkpoint before SIGKILL
  std::string run_id = "none";  // TORCHELASTIC_RUN_ID (torchrun's --rdzv-id, "none" by default)
  // Non-empty: each worker gets TORCHELASTIC_ERROR_FILE=<dir>/error-rank-<rank>.json (made empty of old
  // files first), where torch's @record writes a failing program's exception.
  std::string error_file_dir;
  // Each worker's stderr passes through the launcher, which keeps its last lines for the failure's message.
  bool keep_stderr_tail = false;
};

// How the workers ended.
struct WorkersResult {
  int code = 0;              // 0: all succeeded; else the first failed worker's exit code, 128 + signal if one ended it
  int local_rank = -1;       // the first failed worker
  int rank = -1;             // its global rank
  std::string error_file;    // its TORCHELASTIC_ERROR_FILE, when error_file_dir was set
  std::vector<std::string> stderr_tail;  // its last lines of stderr, with keep_stderr_tail
  int signal = 0;            // the signal that ended it; 0 when it exited
  bool interrupted = false;  // SIGTERM or SIGINT reached the launcher and was forwarded
  // Every failed worker, in the order the launcher saw them end: the first is the one above, then those that failed
  // after it (stopped by the launcher, or failing on their own).
  std::vector<WorkerExit> failures;

  // The launcher's own exit code when the workers are trainpoint (their codes are its documented
  // classes): the failed worker's, or 143 (interrupted) when all stopped cleanly after a signal.
  int exit_code() const { return code == 0 && interrupted ? 143 : code; }
};

// Runs the workers (a WorkerGroup) until all exit. SIGTERM and SIGINT are forwarded to them. When one fails, the
// others are stopped (SIGTERM, then SIGKILL after stop_grace_seconds). A program that cannot be started is a
// tp::Error of class spec (the spec's job.command names it), thrown once the workers already started have been
// stopped.
WorkersResult run_workers(const WorkerLaunch& launch);

// The environment variables a worker gets, as torchrun sets them (docs/distributed.md, "What a worker
// is told"): RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_*,
// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*, and OMP_NUM_THREADS when the launcher's environment has none.
// The rank is topology.rank when a launcher already made this process one worker.
std::map<std::string, std::string> worker_environment(const Topology& topology, int local_rank,
                                                      const std::string& run_id);

// Where worker `rank`'s TORCHELASTIC_ERROR_FILE is under `directory`.
std::string error_file_path(const std::string& directory, int rank);

}  // namespace tp::dist
