// The collectives of dist/communicator.h and the in-process group they are tested on: 1, 2 and 3 ranks,
// each on its own thread of this process (tests/support/ranks_on_threads.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "dist/communicator.h"
#include "dist/in_process_group.h"
#include "support/ranks_on_threads.h"

namespace tp::dist {
namespace {

using testing::on_ranks;
using testing::run_ranks;

// What each rank got from a collective, by rank.
template <typename T>
class ByRank {
 public:
  explicit ByRank(int world_size) : values_(static_cast<std::size_t>(world_size)) {}
  void set(int rank, T value) {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[static_cast<std::size_t>(rank)] = std::move(value);
  }
  const std::vector<T>& values() const { return values_; }

 private:
  std::mutex mutex_;
  std::vector<T> values_;
};

// The error code of a rank's exception, or nullopt when it did not throw tp::Error.
std::optional<ExitCode> code_of(const std::exception_ptr& error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const Error& e) {
    return e.code();
  } catch (...) {
  }
  return std::nullopt;
}

class CommunicatorCollectives : public ::testing::TestWithParam<int> {};

TEST_P(CommunicatorCollectives, SumsGathersMinimaAndFlagsReachEveryRankAlike) {
  const int world = GetParam();
  ByRank<std::vector<std::int64_t>> sums(world), gathered(world);
  ByRank<std::vector<double>> real_sums(world);
  ByRank<std::int64_t> minima(world);
  ByRank<std::vector<bool>> flags(world);
  on_ranks(world, [&](Communicator& communicator) {
    const int r = communicator.rank();
    sums.set(r, sum_over_ranks(communicator, std::vector<std::int64_t>{1, r, 10 * r}));
    real_sums.set(r, sum_over_ranks(communicator, std::vector<double>{0.5, r * 0.25}));
    gathered.set(r, all_gather_values(communicator, 100 + 7 * r));
    minima.set(r, min_over_ranks(communicator, 50 - 3 * r));
    flags.set(r, {any_rank(communicator, false), any_rank(communicator, r == world - 1), any_rank(communicator, true)});
  });
  std::int64_t rank_sum = 0;
  std::vector<std::int64_t> expected_gather;
  for (int r = 0; r < world; ++r) {
    rank_sum += r;
    expected_gather.push_back(100 + 7 * r);
  }
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(sums.values()[r], (std::vector<std::int64_t>{world, rank_sum, 10 * rank_sum}));
    EXPECT_EQ(real_sums.values()[r], (std::vector<double>{0.5 * world, 0.25 * static_cast<double>(rank_sum)}));
    EXPECT_EQ(gathered.values()[r], expected_gather);
    EXPECT_EQ(minima.values()[r], 50 - 3 * (world - 1));
    EXPECT_EQ(flags.values()[r], (std::vector<bool>{false, true, true}));
  }
}

TEST_P(CommunicatorCollectives, StringsOfDifferentCountsAndAnyBytesAreGatheredInRankOrder) {
  const int world = GetParam();
  // Rank 0 two strings (one with a newline and a NUL byte), rank 1 none, rank 2 three (one empty).
  const std::vector<std::vector<std::string>> mine{
      {"images/a.png", std::string("two\nlines\0nul", 13)}, {}, {"c", "", "rank 2's last"}};
  ByRank<std::vector<std::string>> gathered(world);
  on_ranks(world, [&](Communicator& communicator) {
    const int r = communicator.rank();
    gathered.set(r, all_gather_strings(communicator, mine[static_cast<std::size_t>(r)]));
  });
  std::vector<std::string> expected;
  for (int r = 0; r < world; ++r) expected.insert(expected.end(), mine[r].begin(), mine[r].end());
  for (int r = 0; r < world; ++r) EXPECT_EQ(gathered.values()[r], expected) << "rank " << r;
}

TEST_P(CommunicatorCollectives, NoStringsOnAnyRankGatherToNone) {
  const int world = GetParam();
  ByRank<std::vector<std::string>> gathered(world);
  on_ranks(world, [&](Communicator& communicator) {
    gathered.set(communicator.rank(), all_gather_strings(communicator, {}));
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(gathered.values()[r].empty()) << "rank " << r;
}

TEST_P(CommunicatorCollectives, BroadcastBytesFromTheLastRankReachesEveryRank) {
  const int world = GetParam();
  const std::string document(100000, 'x');
  ByRank<std::string> received(world);
  on_ranks(world, [&](Communicator& communicator) {
    const bool root = communicator.rank() == world - 1;
    received.set(communicator.rank(), broadcast_bytes(communicator, root ? document : "not sent", world - 1));
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(received.values()[r], document) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommunicatorCollectives, ::testing::Values(1, 2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param); });

TEST(InProcessCommunicator, AllReduceSumsInPlaceAndAsyncOnesAreDoneByTheirWait) {
  ByRank<std::vector<double>> results(3);
  on_ranks(3, [&](Communicator& communicator) {
    const auto r = static_cast<double>(communicator.rank());
    std::vector<at::Tensor> tensors{at::full({2, 2}, r, at::kDouble), at::full({3}, 1.0, at::kFloat)};
    communicator.all_reduce_sum(tensors);
    at::Tensor gradient = at::full({4}, r + 1, at::kFloat);
    communicator.all_reduce_sum_async(gradient)->wait();
    communicator.barrier();
    results.set(communicator.rank(), {tensors[0][1][1].item<double>(), tensors[1][2].item<double>(),
                                      gradient[3].item<double>()});
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(results.values()[r], (std::vector<double>{3, 3, 6})) << "rank " << r;
}

TEST(InProcessCommunicator, BroadcastCopiesTheRootsTensorsAndLeavesTheRootsAsTheyWere) {
  ByRank<std::vector<std::int64_t>> results(3);
  on_ranks(3, [&](Communicator& communicator) {
    std::vector<at::Tensor> tensors{at::full({2}, communicator.rank() * 10 + 5, at::kLong)};
    communicator.broadcast(tensors, 1);
    results.set(communicator.rank(), {tensors[0][0].item<std::int64_t>(), tensors[0][1].item<std::int64_t>()});
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(results.values()[r], (std::vector<std::int64_t>{15, 15})) << "rank " << r;
}

TEST(InProcessCommunicator, RanksCallingDifferentCollectivesOrShapesAllFailAsABug) {
  const auto different_calls = run_ranks(2, [](Communicator& communicator) {
    std::vector<at::Tensor> tensors{at::zeros({1})};
    if (communicator.rank() == 0) communicator.all_reduce_sum(tensors);
    if (communicator.rank() == 1) communicator.broadcast(tensors, 0);
  });
  const auto different_shapes = run_ranks(2, [](Communicator& communicator) {
    std::vector<at::Tensor> tensors{at::zeros({communicator.rank() + 1})};
    communicator.all_reduce_sum(tensors);
  });
  for (const auto* errors : {&different_calls, &different_shapes}) {
    ASSERT_EQ(errors->size(), 2u);
    for (const auto& error : *errors) EXPECT_EQ(code_of(error), ExitCode::internal);
  }
}

TEST(InProcessCommunicator, ACollectiveWaitingForARankThatLeftFailsNamingIt) {
  const auto errors = run_ranks(3, [](Communicator& communicator) {
    if (communicator.rank() == 2) return;  // leaves without the barrier the others wait in
    communicator.barrier();
  });
  EXPECT_FALSE(errors[2]);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(code_of(errors[r]), ExitCode::peer_lost) << "rank " << r;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const Error& e) {
      // Rank 1 may also name rank 0, which left once it had failed.
      EXPECT_NE(std::string(e.what()).find("2 left the in-process group before this barrier"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tp::dist
