#include "dist/launcher.h"

#include <signal.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include "common/cpu.h"
#include "common/log.h"

namespace tp::dist {
namespace {

volatile std::sig_atomic_t received_signal = 0;

void remember_signal(int signal_number) { received_signal = signal_number; }

// How long the launcher waits for the workers before it looks again for a signal to forward.
constexpr std::chrono::milliseconds kPollWait(50);

int global_rank(const Topology& topology, int local_rank) {
  return topology.rank.value_or(topology.node_rank * topology.nproc_per_node + local_rank);
}

// SIGTERM and SIGINT are remembered, for run_workers to forward.
void catch_stop_signals() {
  struct sigaction action {};
  action.sa_handler = remember_signal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
}

// Worker `local_rank`: launch.program, or this binary re-executed, with torchrun's variables.
Worker worker_of(const WorkerLaunch& launch, int local_rank) {
  Worker worker;
  worker.local_rank = local_rank;
  worker.rank = global_rank(launch.topology, local_rank);
  ChildRequest& process = worker.process;
  process.program = launch.program.empty() ? "/proc/self/exe" : launch.program;
  if (launch.program.empty()) process.argv0 = "trainpoint";
  process.arguments = launch.arguments;
  process.working_directory = launch.working_directory;
  process.output = launch.keep_stderr_tail ? ChildOutput::stderr_piped : ChildOutput::inherited;
  for (const auto& [name, value] : worker_environment(launch.topology, local_rank, launch.run_id)) {
    process.environment[name] = value;
  }
  for (const auto& [name, value] : launch.environment) process.environment[name] = value;
  if (!launch.error_file_dir.empty()) {
    worker.error_file = error_file_path(launch.error_file_dir, worker.rank);
    process.environment["TORCHELASTIC_ERROR_FILE"] = worker.error_file;
  }
  return worker;
}

// The workers to start, their error files' directory made and emptied of their old files.
std::vector<Worker> plan_workers(const WorkerLaunch& launch) {
  std::error_code error;
  if (!launch.error_file_dir.empty()) std::filesystem::create_directories(launch.error_file_dir, error);
  // A launcher that made this process one worker already (torchrun) leaves one program to start.
  const int count = launch.topology.rank ? 1 : launch.topology.nproc_per_node;
  std::vector<Worker> workers;
  for (int local_rank = 0; local_rank < count; ++local_rank) {
    workers.push_back(worker_of(launch, local_rank));
    if (!workers.back().error_file.empty()) std::filesystem::remove(workers.back().error_file, error);
  }
  return workers;
}

void report_first_failure(const WorkerGroup& group) {
  const WorkerExit first = group.failures().front();
  spdlog::error("worker {} (rank {}) exited with code {}: stopping the other workers", first.local_rank, first.rank,
                first.code);
}

WorkersResult result_of(std::vector<WorkerExit> failures, bool interrupted) {
  if (failures.empty()) {
    WorkersResult result;
    result.interrupted = interrupted;
    return result;
  }
  const WorkerExit first = failures.front();
  return {first.code,        first.local_rank, first.rank,  first.error_file,
          first.stderr_tail, first.signal,     interrupted, std::move(failures)};
}

}  // namespace

std::map<std::string, std::string> worker_environment(const Topology& topology, int local_rank,
                                                      const std::string& run_id) {
  const std::string rank = std::to_string(global_rank(topology, local_rank));
  const std::string world_size = std::to_string(topology.world_size());
  std::map<std::string, std::string> environment{
      {"RANK", rank},
      {"LOCAL_RANK", std::to_string(topology.local_rank.value_or(local_rank))},
      {"WORLD_SIZE", world_size},
      {"LOCAL_WORLD_SIZE", std::to_string(topology.nproc_per_node)},
      {"GROUP_RANK", std::to_string(topology.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(topology.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", rank},
      {"ROLE_WORLD_SIZE", world_size},
      {"MASTER_ADDR", topology.master_addr},
      {"MASTER_PORT", std::to_string(topology.master_port)},
      {"TORCHELASTIC_RUN_ID", run_id},
      // Kubernetes restarts a failed pod; trainpoint does not restart workers in place.
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      // The program's init_process_group serves its own store on rank 0, as under torchrun without an agent store.
      {"TORCHELASTIC_USE_AGENT_STORE", "False"}};
  // torchrun sets 1 when it starts several workers; each worker's share of the pod's cores keeps a CPU job
  // as fast as trainpoint's own workers are (they share the cores the same way).
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    environment["OMP_NUM_THREADS"] = std::to_string(std::max(1, usable_cores() / topology.nproc_per_node));
  }
  return environment;
}

std::string error_file_path(const std::string& directory, int rank) {
  return (std::filesystem::path(directory) / fmt::format("error-rank-{}.json", rank)).string();
}

WorkersResult run_workers(const WorkerLaunch& launch) {
  catch_stop_signals();
  WorkerGroup group(plan_workers(launch));
  group.start();
  const int first_rank = global_rank(launch.topology, 0);
  spdlog::info("started {} workers (ranks {}-{} of {})", group.size(), first_rank,
               first_rank + static_cast<int>(group.size()) - 1, launch.topology.world_size());
  const std::chrono::seconds grace(launch.stop_grace_seconds);
  while (group.running()) {
    group.poll(kPollWait);
    if (group.failed()) {
      report_first_failure(group);
      group.stop(SIGTERM, grace);
    } else if (received_signal != 0) {
      spdlog::warn("received signal {}: asking the workers to save a checkpoint and stop", int(received_signal));
      group.stop(SIGTERM, grace);
      if (group.failed()) report_first_failure(group);
    }
  }
  return result_of(group.failures(), received_signal != 0);
}

}  // namespace tp::dist
