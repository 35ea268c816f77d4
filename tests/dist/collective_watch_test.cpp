// The collective watch's deadlines, with collectives whose state the test sets (what the backend's
// isCompleted() and exception() would say).
#include "dist/collective_watch.h"

#include <gtest/gtest.h>

#include <memory>

namespace tp::dist {
namespace {

using Clock = CollectiveWatch::Clock;
using std::chrono::seconds;

// A collective's state as the backend would report it.
struct FakeWork {
  CollectiveWatch::Status status;
  CollectiveWatch::Poll poll() {
    return [this] { return status; };
  }
};

TEST(CollectiveWatch, ACollectiveRunningPastTheTimeoutIsTheFailureNamingItsPhase) {
  CollectiveWatch watch(seconds(10));
  const auto start = Clock::now();
  FakeWork work;
  watch.add(Phase::all_reduce, start, work.poll());

  const auto early = watch.inspect(start + seconds(9));
  EXPECT_FALSE(early.failure);
  ASSERT_TRUE(early.oldest);
  EXPECT_EQ(early.oldest->what, Phase::all_reduce);
  EXPECT_EQ(early.oldest->since, start);

  const auto late = watch.inspect(start + seconds(11));
  ASSERT_TRUE(late.failure);
  EXPECT_EQ(late.failure->what, Phase::all_reduce);
  EXPECT_EQ(late.failure->cause, "not finished after 11.0s (dist.timeout_s = 10)");
}

TEST(CollectiveWatch, FinishedCollectivesAreForgottenAndNeverLate) {
  CollectiveWatch watch(seconds(10));
  const auto start = Clock::now();
  FakeWork first, second;
  watch.add(Phase::broadcast, start, first.poll());
  watch.add(Phase::all_reduce, start + seconds(5), second.poll());
  first.status.finished = true;

  const auto inspection = watch.inspect(start + seconds(12));
  EXPECT_FALSE(inspection.failure) << inspection.failure->cause;
  ASSERT_TRUE(inspection.oldest);
  EXPECT_EQ(inspection.oldest->what, Phase::all_reduce);

  second.status.finished = true;
  const auto done = watch.inspect(start + seconds(100));
  EXPECT_FALSE(done.failure);
  EXPECT_FALSE(done.oldest);
}

TEST(CollectiveWatch, AFailedCollectiveIsTheFailureAtOnceWithTheBackendsCause) {
  CollectiveWatch watch(seconds(600));
  const auto start = Clock::now();
  FakeWork work;
  watch.add(Phase::all_reduce, start, work.poll());
  work.status = {true, "NCCL error: remote process exited or there was a network error"};

  const auto inspection = watch.inspect(start + seconds(1));
  ASSERT_TRUE(inspection.failure);
  EXPECT_EQ(inspection.failure->what, Phase::all_reduce);
  EXPECT_EQ(inspection.failure->cause, work.status.error);
  EXPECT_FALSE(inspection.oldest);
}

}  // namespace
}  // namespace tp::dist
