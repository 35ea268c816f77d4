#include "common/tasks.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace tp {

std::optional<std::size_t> TaskQueue::next() {
  if (failed()) return std::nullopt;
  const std::size_t index = next_++;
  if (index >= count_) return std::nullopt;
  return index;
}

void TaskQueue::drain(const std::function<void(std::size_t)>& task) {
  for (std::optional<std::size_t> index = next(); index; index = next()) {
    try {
      task(*index);
    } catch (...) {
      fail(std::current_exception());
    }
  }
}

void TaskQueue::fail(std::exception_ptr failure) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!first_failure_) first_failure_ = std::move(failure);
  failed_ = true;
}

void TaskQueue::rethrow_failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (first_failure_) std::rethrow_exception(first_failure_);
}

void run_on_threads(std::size_t count, int threads, const std::function<void(TaskQueue&)>& worker) {
  if (count == 0) return;
  TaskQueue queue(count);
  const auto guarded = [&] {
    try {
      worker(queue);
    } catch (...) {
      queue.fail(std::current_exception());
    }
  };
  const std::size_t thread_count = std::clamp<std::size_t>(count, 1, static_cast<std::size_t>(std::max(threads, 1)));
  std::vector<std::thread> others;
  for (std::size_t i = 1; i < thread_count; ++i) others.emplace_back(guarded);
  guarded();
  for (std::thread& thread : others) thread.join();
  queue.rethrow_failure();
}

void run_tasks(std::size_t count, int threads, const std::function<void(std::size_t)>& task) {
  run_on_threads(count, threads, [&](TaskQueue& queue) { queue.drain(task); });
}

}  // namespace tp
