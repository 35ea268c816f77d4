#include "dist/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/signals.h"

namespace tp::dist {
namespace {

volatile std::sig_atomic_t received_signal = 0;

void remember_signal(int signal_number) { received_signal = signal_number; }

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// A started worker, and the reason it could not be started (empty when it was).
struct Started {
  pid_t pid = -1;
  std::string exec_error;
};

// The child reports a failed exec through a pipe that a successful exec closes (O_CLOEXEC), so that
// "cannot execute" is told apart from a program that ran and exited.
Started start_worker(const WorkerLaunch& launch, int local_rank) {
  const bool self = launch.program.empty();
  std::vector<std::string> argv{self ? "trainpoint" : launch.program};
  argv.insert(argv.end(), launch.arguments.begin(), launch.arguments.end());
  auto environment = worker_environment(launch.topology, local_rank);
  for (const auto& [name, value] : launch.environment) environment[name] = value;

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    fail(ExitCode::internal, "cannot start worker {}: pipe failed: {}", local_rank, std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) fail(ExitCode::internal, "cannot start worker {}: fork failed: {}", local_rank, std::strerror(errno));
  if (pid == 0) {
    ::close(report[0]);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    restore_broken_pipe_default();  // a user's program (a shell pipeline) expects it
    for (const auto& [name, value] : environment) ::setenv(name.c_str(), value.c_str(), 1);
    if (!launch.working_directory.empty() && ::chdir(launch.working_directory.c_str()) != 0) {
      std::fprintf(stderr, "cannot start worker %d: cannot enter %s: %s\n", local_rank,
                   launch.working_directory.c_str(), std::strerror(errno));
      std::_Exit(static_cast<int>(ExitCode::internal));
    }
    std::vector<char*> raw;
    for (auto& argument : argv) raw.push_back(argument.data());
    raw.push_back(nullptr);
    if (self) {
      ::execv("/proc/self/exe", raw.data());
      std::fprintf(stderr, "cannot start worker %d: exec failed: %s\n", local_rank, std::strerror(errno));
      std::_Exit(static_cast<int>(ExitCode::internal));
    }
    ::execvp(launch.program.c_str(), raw.data());
    const int cause = errno;
    [[maybe_unused]] const auto written = ::write(report[1], &cause, sizeof cause);
    std::_Exit(127);
  }
  ::close(report[1]);
  int cause = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &cause, sizeof cause);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got != static_cast<ssize_t>(sizeof cause)) return {pid, ""};
  ::waitpid(pid, nullptr, 0);
  return {-1, fmt::format("cannot execute '{}': {}", launch.program, std::strerror(cause))};
}

}  // namespace

std::map<std::string, std::string> worker_environment(const Topology& topology, int local_rank) {
  return {{"RANK", std::to_string(topology.node_rank * topology.nproc_per_node + local_rank)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"WORLD_SIZE", std::to_string(topology.world_size())},
          {"LOCAL_WORLD_SIZE", std::to_string(topology.nproc_per_node)},
          {"MASTER_ADDR", topology.master_addr},
          {"MASTER_PORT", std::to_string(topology.master_port)}};
}

WorkersResult run_workers(const WorkerLaunch& launch) {
  struct sigaction action {};
  action.sa_handler = remember_signal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);

  std::map<pid_t, int> running;  // pid -> local rank
  for (int local_rank = 0; local_rank < launch.topology.nproc_per_node; ++local_rank) {
    const Started started = start_worker(launch, local_rank);
    if (!started.exec_error.empty()) {
      for (const auto& [pid, rank] : running) ::kill(pid, SIGKILL);
      for (const auto& [pid, rank] : running) ::waitpid(pid, nullptr, 0);
      fail(ExitCode::spec, "cannot start worker {}: {}", local_rank, started.exec_error);
    }
    running[started.pid] = local_rank;
  }
  spdlog::info("started {} workers (ranks {}-{} of {})", running.size(),
               launch.topology.node_rank * launch.topology.nproc_per_node,
               (launch.topology.node_rank + 1) * launch.topology.nproc_per_node - 1, launch.topology.world_size());

  WorkersResult result;
  bool stopping = false;
  std::chrono::steady_clock::time_point kill_at;
  auto stop_all = [&](int signal_number) {
    for (const auto& [pid, local_rank] : running) ::kill(pid, signal_number);
  };
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid) > 0) {
      const int local_rank = running[pid];
      running.erase(pid);
      const int code = exit_code_of(status);
      if (code != 0 && result.code == 0) {
        result.code = code;
        result.local_rank = local_rank;
        result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        spdlog::error("worker {} exited with code {}: stopping the other workers", local_rank, code);
      }
      if (code != 0 && !stopping) {
        stopping = true;
        kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(launch.stop_grace_seconds);
        stop_all(SIGTERM);
      }
      continue;
    }
    if (received_signal != 0 && !stopping) {
      spdlog::warn("received signal {}: asking the workers to save a checkpoint and stop", int(received_signal));
      stopping = true;
      kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(launch.stop_grace_seconds);
      stop_all(SIGTERM);
    }
    if (stopping && std::chrono::steady_clock::now() > kill_at) stop_all(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  result.interrupted = received_signal != 0;
  return result;
}

}  // namespace tp::dist
