// Independent tasks run on a few threads, the first failure cancelling the rest: S3's parallel transfers,
// pack's shards, git's parallel checkout.
//
// Each thread takes the next index from a TaskQueue until none is left. Once a task throws, the queue
// hands out no more indices (tasks under way finish); the first exception is rethrown by run_on_threads
// once every thread is done. A worker that sets up what its tasks share (a connection, an open
// repository) does so before draining the queue; an exception there counts as a failed task.
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>

namespace tp {

class TaskQueue {
 public:
  explicit TaskQueue(std::size_t count) : count_(count) {}

  // The next index to run, or none once all were handed out or a task failed.
  std::optional<std::size_t> next();
  // Runs task(index) for each index this thread takes; a task's exception is kept (the first) and ends
  // the handing out.
  void drain(const std::function<void(std::size_t)>& task);
  void fail(std::exception_ptr failure);
  bool failed() const { return failed_.load(); }
  void rethrow_failure() const;

 private:
  const std::size_t count_;
  std::atomic<std::size_t> next_{0};
  std::atomic<bool> failed_{false};
  mutable std::mutex mutex_;
  std::exception_ptr first_failure_;
};

// Runs worker(queue) on min(threads, count) threads, at least one, the calling thread among them, then
// rethrows the first failure. Nothing runs when count is 0.
void run_on_threads(std::size_t count, int threads, const std::function<void(TaskQueue&)>& worker);

// run_on_threads for tasks that share nothing: task(index) for every index in [0, count).
void run_tasks(std::size_t count, int threads, const std::function<void(std::size_t)>& task);

}  // namespace tp
