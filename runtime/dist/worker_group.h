// The local launcher's workers as one group, as torch elastic's PContext: start them all, poll which ended
// (without blocking on them), stop the rest with a signal and a grace before SIGKILL, and keep every failure in
// the order it was seen, the first first. A worker whose stderr is piped (ChildOutput::stderr_piped) has it passed
// on to trainpoint's stderr as it comes while the group polls, its last lines kept for its failure. The policy (when
// to stop, what to tell) is the caller's: dist/launcher.cpp's run_workers. Torch-free; one thread uses a group.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/child_process.h"

namespace tp::dist {

// One worker to start.
struct Worker {
  int local_rank = 0;
  int rank = 0;          // its global rank
  ChildRequest process;  // what runs
  std::string error_file;  // its TORCHELASTIC_ERROR_FILE, named in its failure; empty: none
};

// How one worker ended.
struct WorkerExit {
  int local_rank = -1;
  int rank = -1;
  int code = 0;    // its exit code, or 128 + the signal that ended it
  int signal = 0;  // the signal that ended it; 0 when it exited
  std::string error_file;  // as the Worker named it
  // Its last lines of stderr so far (all of them once the group is no longer running), when it was piped.
  std::vector<std::string> stderr_tail;
};

class WorkerGroup {
 public:
  explicit WorkerGroup(std::vector<Worker> workers);
  // Workers still running get SIGKILL and are waited for.
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts every worker, in order. A worker that cannot be started is a tp::Error of class spec ("cannot start
  // worker 1: cannot execute 'train.py': Permission denied"), thrown once those already started are killed and
  // waited for. Throws tp::Error (internal) when a pipe or fork() fails.
  void start();
  // Waits for the workers that have ended, without blocking on them; when none had, passes on their stderr for up
  // to `wait` (returning early when some comes, a worker's stderr ends, or a signal arrives). Returns the workers
  // that ended in this call. Once the last one has ended, their stderr is read to its end (briefly: a worker's own
  // children may hold it open) and closed.
  std::vector<WorkerExit> poll(std::chrono::milliseconds wait);
  // Sends `signal` to every running worker, polls until all have ended or `grace` has passed, then sends SIGKILL
  // to those left and polls until they have ended.
  void stop(int signal, std::chrono::milliseconds grace);

  std::size_t size() const { return members_.size(); }
  bool running() const;
  bool failed() const { return !failure_order_.empty(); }
  // Every worker that ended with a code other than 0, in the order the group saw them end: the first is the first
  // failure.
  std::vector<WorkerExit> failures() const;

 private:
  // A worker's stderr on its way to trainpoint's, its last lines kept.
  class StderrTail {
   public:
    // Reads what is there and passes it on; false at the end of the stream.
    bool pump(int fd);
    std::vector<std::string> last_lines() const;

   private:
    std::string text_;
  };
  struct Member {
    explicit Member(Worker planned) : worker(std::move(planned)) {}
    Worker worker;
    pid_t pid = -1;  // -1: not started, or ended and waited for
    int wait_status = 0;
    int stderr_pipe = -1;  // the read end, non-blocking; -1 when not piped or closed
    StderrTail tail;
  };

  void signal_running(int signal);
  std::vector<WorkerExit> reap();
  void pump_stderr(std::chrono::milliseconds wait);
  void drain_stderr();
  WorkerExit exit_of(const Member& member) const;

  std::vector<Member> members_;
  std::vector<std::size_t> failure_order_;  // indexes into members_
};

}  // namespace tp::dist
