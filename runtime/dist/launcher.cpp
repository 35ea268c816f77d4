#include "dist/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/child_process.h"
#include "common/cpu.h"
#include "common/error.h"
#include "common/log.h"
#include "common/signals.h"

namespace tp::dist {
namespace {

volatile std::sig_atomic_t received_signal = 0;

void remember_signal(int signal_number) { received_signal = signal_number; }

// A started worker, and the reason it could not be started (empty when it was).
struct Started {
  pid_t pid = -1;
  std::string exec_error;
  int stderr_pipe = -1;  // the read end of its stderr, with keep_stderr_tail
};

// How many of a worker's last stderr lines a failure's message can show.
constexpr std::size_t kStderrTailLines = 20;

// A worker's stderr on its way to the launcher's: passed on as it comes, its last lines kept.
class StderrTail {
 public:
  // Reads what is there; returns false at the end of the stream.
  bool pump(int fd) {
    char buffer[65536];
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) return errno == EINTR || errno == EAGAIN;
    if (got == 0) return false;
    for (ssize_t written = 0; written < got;) {
      const ssize_t now = ::write(STDERR_FILENO, buffer + written, static_cast<std::size_t>(got - written));
      if (now < 0 && errno != EINTR) break;  // our own stderr is gone: keep the lines anyway
      written += std::max<ssize_t>(now, 0);
    }
    text_.append(buffer, static_cast<std::size_t>(got));
    constexpr std::size_t kKeep = 64 * 1024;
    if (text_.size() > 2 * kKeep) text_.erase(0, text_.size() - kKeep);
    return true;
  }
  std::vector<std::string> last_lines() const {
    std::vector<std::string> lines;
    std::size_t end = text_.size();
    while (end > 0 && lines.size() < kStderrTailLines) {
      const std::size_t start = text_.rfind('\n', end - 1);
      const std::size_t from = start == std::string::npos ? 0 : start + 1;
      std::string line = text_.substr(from, end - from);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) lines.insert(lines.begin(), std::move(line));
      if (start == std::string::npos) break;
      end = start;
    }
    return lines;
  }

 private:
  std::string text_;
};

Started start_worker(const WorkerLaunch& launch, int local_rank) {
  ChildRequest request;
  request.program = launch.program.empty() ? "/proc/self/exe" : launch.program;
  if (launch.program.empty()) request.argv0 = "trainpoint";
  request.arguments = launch.arguments;
  request.working_directory = launch.working_directory;
  request.output = launch.keep_stderr_tail ? ChildOutput::stderr_piped : ChildOutput::inherited;
  for (const auto& [name, value] : worker_environment(launch.topology, local_rank, launch.run_id)) {
    request.environment[name] = value;
  }
  for (const auto& [name, value] : launch.environment) request.environment[name] = value;
  const StartedChild child = start_child(request);
  if (child.pid < 0) return {-1, child.failure};
  if (child.output >= 0) ::fcntl(child.output, F_SETFL, O_NONBLOCK);
  return {child.pid, "", child.output};
}

int global_rank(const Topology& topology, int local_rank) {
  return topology.rank.value_or(topology.node_rank * topology.nproc_per_node + local_rank);
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
  struct sigaction action {};
  action.sa_handler = remember_signal;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);

  // A launcher that made this process one worker already (torchrun) leaves one program to start.
  const int workers = launch.topology.rank ? 1 : launch.topology.nproc_per_node;
  if (!launch.error_file_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(launch.error_file_dir, error);
    for (int local_rank = 0; local_rank < workers; ++local_rank) {
      std::filesystem::remove(error_file_path(launch.error_file_dir, global_rank(launch.topology, local_rank)), error);
    }
  }
  std::map<pid_t, int> running;  // pid -> local rank
  std::map<int, int> stderr_pipes;  // local rank -> the read end of its stderr
  std::map<int, StderrTail> tails;  // local rank -> its stderr's last lines
  for (int local_rank = 0; local_rank < workers; ++local_rank) {
    WorkerLaunch worker = launch;
    if (!launch.error_file_dir.empty()) {
      worker.environment["TORCHELASTIC_ERROR_FILE"] =
          error_file_path(launch.error_file_dir, global_rank(launch.topology, local_rank));
    }
    const Started started = start_worker(worker, local_rank);
    if (!started.exec_error.empty()) {
      for (const auto& [pid, rank] : running) ::kill(pid, SIGKILL);
      for (const auto& [pid, rank] : running) ::waitpid(pid, nullptr, 0);
      for (const auto& [rank, fd] : stderr_pipes) ::close(fd);
      fail(ExitCode::spec, "cannot start worker {}: {}", local_rank, started.exec_error);
    }
    running[started.pid] = local_rank;
    if (started.stderr_pipe >= 0) stderr_pipes[local_rank] = started.stderr_pipe;
  }
  const int first_rank = global_rank(launch.topology, 0);
  spdlog::info("started {} workers (ranks {}-{} of {})", running.size(), first_rank, first_rank + workers - 1,
               launch.topology.world_size());

  // Passes on what the workers wrote to stderr, waiting at most `timeout` for some.
  auto pump_stderr = [&](std::chrono::milliseconds timeout) {
    if (stderr_pipes.empty()) {
      std::this_thread::sleep_for(timeout);
      return;
    }
    std::vector<pollfd> polled;
    std::vector<int> ranks;
    for (const auto& [local_rank, fd] : stderr_pipes) {
      polled.push_back({fd, POLLIN, 0});
      ranks.push_back(local_rank);
    }
    if (::poll(polled.data(), polled.size(), static_cast<int>(timeout.count())) <= 0) return;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      if (!tails[ranks[i]].pump(polled[i].fd)) {
        ::close(polled[i].fd);
        stderr_pipes.erase(ranks[i]);
      }
    }
  };

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
        result.rank = global_rank(launch.topology, local_rank);
        result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        spdlog::error("worker {} (rank {}) exited with code {}: stopping the other workers", local_rank, result.rank,
                      code);
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
    pump_stderr(std::chrono::milliseconds(50));
  }
  // What the workers wrote last; a worker's own children may still hold its pipe open: no waiting for them.
  for (int round = 0; round < 20 && !stderr_pipes.empty(); ++round) pump_stderr(std::chrono::milliseconds(5));
  for (const auto& [local_rank, fd] : stderr_pipes) ::close(fd);
  result.interrupted = received_signal != 0;
  if (result.local_rank >= 0) {
    result.stderr_tail = tails[result.local_rank].last_lines();
    if (!launch.error_file_dir.empty()) result.error_file = error_file_path(launch.error_file_dir, result.rank);
  }
  return result;
}

}  // namespace tp::dist
