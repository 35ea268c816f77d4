// The deadline of every collective in flight. With NCCL the host never waits for a collective (only the GPU
// stream does), so neither the backend's wait nor the training loop notices one that never finishes: the
// communicator's watchdog thread asks this watch, and the heartbeat publishes the collective a rank is held
// in even while its host is blocked elsewhere. Torch-free: the backend's work is reached through `Poll`.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "dist/phase.h"

namespace tp::dist {

class CollectiveWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // What the backend says of one collective: still running, finished, or failed (finished with an error).
  struct Status {
    bool finished = false;
    std::string error;  // not empty: it failed, and why
  };
  using Poll = std::function<Status()>;

  struct Failure {
    Phase what;
    std::string cause;
  };
  struct Running {
    Phase what;
    Clock::time_point since;
  };
  struct Inspection {
    std::optional<Failure> failure;  // the first collective that failed or outlasted the timeout
    std::optional<Running> oldest;   // the oldest collective still running
  };

  explicit CollectiveWatch(std::chrono::seconds timeout) : timeout_(timeout) {}

  // A collective that started at `started`; `poll` is called from other threads until it has finished.
  void add(Phase what, Clock::time_point started, Poll poll);

  // Polls the collectives in the order they started and forgets those that finished without error.
  Inspection inspect(Clock::time_point now);

 private:
  struct InFlight {
    Phase what;
    Clock::time_point started;
    Poll poll;
  };

  std::chrono::seconds timeout_;
  std::mutex mutex_;  // add() runs on the training and autograd threads, inspect() on the watchdog and heartbeat's
  std::deque<InFlight> in_flight_;
};

}  // namespace tp::dist
