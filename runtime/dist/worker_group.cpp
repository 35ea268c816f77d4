#include "dist/worker_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "common/error.h"

namespace tp::dist {
namespace {

// How many of a worker's last stderr lines a failure's message can show.
constexpr std::size_t kStderrTailLines = 20;
// How much of a worker's stderr is kept for them.
constexpr std::size_t kStderrKept = 64 * 1024;
// How often stop() looks again whether the workers have ended.
constexpr std::chrono::milliseconds kStopPollWait(50);

// Writes all of `size` bytes to trainpoint's stderr, as far as it can.
void pass_to_stderr(const char* data, std::size_t size) {
  for (std::size_t written = 0; written < size;) {
    const ssize_t now = ::write(STDERR_FILENO, data + written, size - written);
    if (now < 0 && errno != EINTR) return;  // our own stderr is gone: the lines are kept anyway
    written += static_cast<std::size_t>(std::max<ssize_t>(now, 0));
  }
}

}  // namespace

bool WorkerGroup::StderrTail::pump(int fd) {
  char buffer[65536];
  const ssize_t got = ::read(fd, buffer, sizeof buffer);
  if (got < 0) return errno == EINTR || errno == EAGAIN;
  if (got == 0) return false;
  pass_to_stderr(buffer, static_cast<std::size_t>(got));
  text_.append(buffer, static_cast<std::size_t>(got));
  if (text_.size() > 2 * kStderrKept) text_.erase(0, text_.size() - kStderrKept);
  return true;
}

std::vector<std::string> WorkerGroup::StderrTail::last_lines() const {
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

WorkerGroup::WorkerGroup(std::vector<Worker> workers) {
  for (auto& worker : workers) members_.emplace_back(std::move(worker));
}

WorkerGroup::~WorkerGroup() {
  if (running()) stop(SIGKILL, std::chrono::milliseconds(0));
  for (const auto& member : members_) {
    if (member.stderr_pipe >= 0) ::close(member.stderr_pipe);
  }
}

void WorkerGroup::start() {
  for (auto& member : members_) {
    const StartedChild child = start_child(member.worker.process);
    if (child.pid < 0) {
      stop(SIGKILL, std::chrono::milliseconds(0));
      fail(ExitCode::spec, "cannot start worker {}: {}", member.worker.local_rank, child.failure);
    }
    member.pid = child.pid;
    member.stderr_pipe = child.output;
    if (child.output >= 0) ::fcntl(child.output, F_SETFL, O_NONBLOCK);
  }
}

std::vector<WorkerExit> WorkerGroup::poll(std::chrono::milliseconds wait) {
  std::vector<WorkerExit> exits = reap();
  if (exits.empty()) pump_stderr(wait);
  if (!running()) drain_stderr();
  return exits;
}

void WorkerGroup::stop(int signal, std::chrono::milliseconds grace) {
  signal_running(signal);
  const auto kill_at = std::chrono::steady_clock::now() + grace;
  while (running() && std::chrono::steady_clock::now() < kill_at) poll(kStopPollWait);
  if (running()) signal_running(SIGKILL);
  while (running()) poll(kStopPollWait);
}

bool WorkerGroup::running() const {
  return std::any_of(members_.begin(), members_.end(), [](const Member& member) { return member.pid > 0; });
}

std::vector<WorkerExit> WorkerGroup::failures() const {
  std::vector<WorkerExit> failures;
  for (const std::size_t index : failure_order_) failures.push_back(exit_of(members_[index]));
  return failures;
}

void WorkerGroup::signal_running(int signal) {
  for (const auto& member : members_) {
    if (member.pid > 0) ::kill(member.pid, signal);
  }
}

std::vector<WorkerExit> WorkerGroup::reap() {
  std::vector<WorkerExit> exits;
  for (std::size_t index = 0; index < members_.size(); ++index) {
    Member& member = members_[index];
    if (member.pid <= 0 || ::waitpid(member.pid, &member.wait_status, WNOHANG) != member.pid) continue;
    member.pid = -1;
    exits.push_back(exit_of(member));
    if (exits.back().code != 0) failure_order_.push_back(index);
  }
  return exits;
}

void WorkerGroup::pump_stderr(std::chrono::milliseconds wait) {
  std::vector<pollfd> polled;
  std::vector<Member*> owners;
  for (auto& member : members_) {
    if (member.stderr_pipe < 0) continue;
    polled.push_back({member.stderr_pipe, POLLIN, 0});
    owners.push_back(&member);
  }
  if (polled.empty()) {
    std::this_thread::sleep_for(wait);
    return;
  }
  if (::poll(polled.data(), polled.size(), static_cast<int>(wait.count())) <= 0) return;
  for (std::size_t i = 0; i < polled.size(); ++i) {
    if (polled[i].revents == 0 || owners[i]->tail.pump(polled[i].fd)) continue;
    ::close(polled[i].fd);
    owners[i]->stderr_pipe = -1;
  }
}

// What the workers wrote last. A worker's own children may still hold its pipe open: no waiting for them.
void WorkerGroup::drain_stderr() {
  const auto open = [](const Member& member) { return member.stderr_pipe >= 0; };
  for (int round = 0; round < 20 && std::any_of(members_.begin(), members_.end(), open); ++round) {
    pump_stderr(std::chrono::milliseconds(5));
  }
  for (auto& member : members_) {
    if (member.stderr_pipe >= 0) ::close(member.stderr_pipe);
    member.stderr_pipe = -1;
  }
}

WorkerExit WorkerGroup::exit_of(const Member& member) const {
  const int status = member.wait_status;
  return {member.worker.local_rank, member.worker.rank, exit_code_of(status),
          WIFSIGNALED(status) ? WTERMSIG(status) : 0, member.worker.error_file, member.tail.last_lines()};
}

}  // namespace tp::dist
