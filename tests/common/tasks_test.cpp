// common/tasks.h: every task once, on the threads asked for, and the first failure cancelling the rest.
#include "common/tasks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tp {
namespace {

TEST(Tasks, EveryIndexRunsOnceOnTheThreadsAskedFor) {
  std::vector<std::atomic<int>> runs(1000);
  std::mutex mutex;
  std::condition_variable all_arrived;
  std::set<std::thread::id> threads;
  run_tasks(runs.size(), 4, [&](std::size_t index) {
    ++runs[index];
    std::unique_lock<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
    all_arrived.notify_all();
    // The first tasks wait until four threads hold one: they run at the same time.
    if (index < 4) all_arrived.wait_for(lock, std::chrono::seconds(30), [&] { return threads.size() == 4; });
  });
  for (std::size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << i;
  EXPECT_EQ(threads.size(), 4u);
}

TEST(Tasks, NoTasksRunNoWorker) {
  int workers = 0;
  run_on_threads(0, 4, [&](TaskQueue&) { ++workers; });
  EXPECT_EQ(workers, 0);
}

// A task after the failing one waits until the queue knows of the failure, so that the other thread cannot run
// through every task first (it did, on a loaded machine, while the failing thread waited to be scheduled).
TEST(Tasks, TheFirstFailureStopsTheHandingOutAndIsRethrown) {
  std::atomic<int> started{0};
  try {
    run_on_threads(10000, 2, [&](TaskQueue& queue) {
      queue.drain([&](std::size_t index) {
        ++started;
        if (index == 3) throw std::runtime_error("task 3 failed");
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (index > 3 && !queue.failed() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      });
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "task 3 failed");
  }
  EXPECT_LE(started.load(), 6) << "tasks after the failure were not started";
}

TEST(Tasks, AWorkersSetUpFailureCountsAsAFailedTask) {
  std::atomic<int> ran{0};
  EXPECT_THROW(run_on_threads(100, 3,
                              [&](TaskQueue& queue) {
                                throw std::runtime_error("cannot open the repository");
                                queue.drain([&](std::size_t) { ++ran; });
                              }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 0);
}

TEST(Tasks, EachWorkerKeepsWhatItsTasksShare) {
  std::vector<int> worker_of(500, -1);
  std::atomic<int> workers{0};
  run_on_threads(worker_of.size(), 3, [&](TaskQueue& queue) {
    const int me = workers++;  // a connection, an open repository
    queue.drain([&](std::size_t index) { worker_of[index] = me; });
  });
  for (int worker : worker_of) EXPECT_TRUE(worker >= 0 && worker < workers.load()) << worker;
}

}  // namespace
}  // namespace tp
