// DistributedSampler's properties and the threaded Loader: order, errors, resumption, the memory bound.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>

#include "common/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"

namespace tp::data {
namespace {

std::vector<std::vector<std::size_t>> all_ranks(std::size_t size, int world, bool drop_last,
                                                std::int64_t epoch) {
  std::vector<std::vector<std::size_t>> shares;
  for (int rank = 0; rank < world; ++rank) {
    shares.push_back(DistributedSampler({size, rank, world, true, drop_last, 17, {}, 1}).indices(epoch));
  }
  return shares;
}

TEST(Sampler, SharesAreDisjointCompleteAndEqual) {
  for (std::size_t size : {1u, 7u, 100u, 101u}) {
    for (int world : {1, 2, 3, 8}) {
      const auto shares = all_ranks(size, world, false, 0);
      std::multiset<std::size_t> seen;
      for (const auto& share : shares) {
        EXPECT_EQ(share.size(), shares[0].size());
        seen.insert(share.begin(), share.end());
      }
      // Complete: every sample appears; padding repeats as few as possible.
      EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), size);
      EXPECT_EQ(seen.size(), (size + world - 1) / world * world);
      if (size % world == 0) {
        EXPECT_EQ(seen.size(), size);  // disjoint when nothing is padded
      }

      const auto dropped = all_ranks(size, world, true, 0);
      std::set<std::size_t> unique;
      std::size_t total = 0;
      for (const auto& share : dropped) {
        EXPECT_EQ(share.size(), size / world);
        unique.insert(share.begin(), share.end());
        total += share.size();
      }
      EXPECT_EQ(unique.size(), total);  // disjoint
    }
  }
}

TEST(Sampler, DeterministicAndReshuffledEachEpoch) {
  EXPECT_EQ(all_ranks(1000, 4, false, 3), all_ranks(1000, 4, false, 3));
  EXPECT_NE(all_ranks(1000, 4, false, 3), all_ranks(1000, 4, false, 4));
  const auto unshuffled = DistributedSampler({10, 1, 2, false, false, 0, {}, 1}).indices(5);
  EXPECT_EQ(unshuffled, (std::vector<std::size_t>{1, 3, 5, 7, 9}));
  EXPECT_THROW(DistributedSampler({10, 2, 2, true, false, 0, {}, 1}), Error);
}

// Example i holds the value i; counts how many examples were made.
class CountingDataset final : public Dataset {
 public:
  explicit CountingDataset(std::size_t size, std::size_t fail_at = SIZE_MAX)
      : size_(size), fail_at_(fail_at) {}
  std::size_t size() const override { return size_; }
  Example get(std::size_t index, std::int64_t epoch) const override {
    if (index == fail_at_) fail(ExitCode::data, "sample {} is broken", index);
    ++made;
    return {torch::full({4}, static_cast<float>(index + 1000 * epoch)),
            torch::tensor(static_cast<std::int64_t>(index))};
  }
  mutable std::atomic<std::size_t> made{0};

 private:
  std::size_t size_;
  std::size_t fail_at_;
};

std::vector<std::int64_t> targets_of(Loader& loader) {
  std::vector<std::int64_t> targets;
  while (auto batch = loader.next()) {
    for (std::int64_t i = 0; i < batch->targets.size(0); ++i)
      targets.push_back(batch->targets[i].item<std::int64_t>());
  }
  return targets;
}

TEST(Loader, BatchesInOrderWithAnyWorkerCount) {
  auto dataset = std::make_shared<CountingDataset>(103);
  const auto indices = DistributedSampler({103, 0, 1, true, false, 5, {}, 1}).indices(2);
  for (int workers : {0, 1, 3}) {
    Loader loader(dataset, indices, 2, {10, workers});
    EXPECT_EQ(loader.num_batches(), 11u);
    const auto targets = targets_of(loader);
    EXPECT_EQ(targets, std::vector<std::int64_t>(indices.begin(), indices.end()));
  }
  LoaderOptions drop{10, 2};
  drop.drop_last = true;
  Loader loader(dataset, indices, 0, drop);
  EXPECT_EQ(loader.num_batches(), 10u);
  EXPECT_EQ(targets_of(loader).size(), 100u);
}

// An epoch interrupted after each of 2 ranks trained k samples resumes at sample 2k of the global order:
// at the same world size each rank goes on exactly where it was, padding included; at another world size
// the remaining samples are split anew and every sample of the epoch is trained once (padding aside).
TEST(Sampler, AnInterruptedEpochResumesAtAnyWorldSizeWithEachRemainingSampleOnce) {
  constexpr std::size_t kSize = 51;  // not a multiple of 2 or 3: both pad
  constexpr std::size_t kTrained = 10;
  std::multiset<std::size_t> trained;
  for (int rank = 0; rank < 2; ++rank) {
    const DistributedSampler sampler({kSize, rank, 2, true, false, 9, {}, 1});
    const auto all = sampler.indices(4);
    const auto rest = sampler.indices(4, 2 * kTrained);
    ASSERT_EQ(rest.size(), sampler.samples_per_rank(2 * kTrained));
    EXPECT_EQ(rest, std::vector<std::size_t>(all.begin() + kTrained, all.end())) << "rank " << rank;
    trained.insert(all.begin(), all.begin() + kTrained);
  }
  for (int world : {1, 3}) {
    std::multiset<std::size_t> epoch = trained;
    std::size_t padding = 0;
    for (int rank = 0; rank < world; ++rank) {
      const DistributedSampler sampler({kSize, rank, world, true, false, 9, {}, 1});
      const auto rest = sampler.indices(4, 2 * kTrained);
      EXPECT_EQ(rest.size(), (kSize - 2 * kTrained + world - 1) / world);
      epoch.insert(rest.begin(), rest.end());
      padding = world * rest.size() - (kSize - 2 * kTrained);
    }
    for (std::size_t sample = 0; sample < kSize; ++sample) {
      EXPECT_GE(epoch.count(sample), 1u) << "world " << world << ": sample " << sample << " never trained";
    }
    EXPECT_EQ(epoch.size(), kSize + padding) << "world " << world << ": only the padding repeats";
  }
}

TEST(Loader, WorkerErrorsReachTheCaller) {
  auto dataset = std::make_shared<CountingDataset>(40, 33);
  std::vector<std::size_t> indices(40);
  std::iota(indices.begin(), indices.end(), 0);
  Loader loader(dataset, indices, 0, {8, 2});
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(loader.next());
  EXPECT_THROW(loader.next(), Error);
}

TEST(Loader, RefillsOnlyTheBuffersOfBatchesTheCallerLetGo) {
  auto dataset = std::make_shared<CountingDataset>(400);
  std::vector<std::size_t> indices(400);
  std::iota(indices.begin(), indices.end(), 0);
  const auto expected = [&](std::size_t batch) {
    return torch::arange(static_cast<double>(batch * 4), static_cast<double>(batch * 4 + 4))
        .unsqueeze(1)
        .expand({4, 4});
  };
  for (int workers : {0, 3}) {
    Loader loader(dataset, indices, 0, {4, workers});
    std::vector<std::pair<std::size_t, torch::Tensor>> kept;
    std::vector<torch::Tensor> kept_views;
    std::set<const void*> addresses;
    for (std::size_t b = 0; auto batch = loader.next(); ++b) {
      ASSERT_TRUE(batch->inputs.equal(expected(b))) << b;
      addresses.insert(batch->inputs.data_ptr());
      if (b % 10 == 0) kept.emplace_back(b, batch->inputs);     // the caller holds the batch
      if (b % 10 == 5) kept_views.push_back(batch->inputs[2]);  // or a view of its memory
    }
    // Every batch the caller still holds, or holds a view of, kept its contents.
    for (const auto& [b, inputs] : kept) {
      EXPECT_TRUE(inputs.equal(expected(b))) << b << ", " << workers << " workers";
    }
    for (std::size_t i = 0; i < kept_views.size(); ++i) {
      EXPECT_TRUE(kept_views[i].equal(expected(i * 10 + 5)[2]))
          << i * 10 + 5 << ", " << workers << " workers";
    }
    // New memory only to fill the kept buffers and to replace those the caller held on to (without reuse:
    // 96-100 addresses).
    const std::size_t held = kept.size() + kept_views.size();
    EXPECT_LE(addresses.size(), loader.max_batches_in_memory() + 2 + held) << workers << " workers";
  }
}

TEST(Loader, MemoryStaysWithinTheStatedBound) {
  auto dataset = std::make_shared<CountingDataset>(10000);
  std::vector<std::size_t> indices(10000);
  std::iota(indices.begin(), indices.end(), 0);
  LoaderOptions options{16, 3};
  options.prefetch_per_worker = 2;
  Loader loader(dataset, indices, 0, options);
  EXPECT_EQ(loader.max_batches_in_memory(), 3u * 2u);
  // A consumer slower than the workers: the workers must stop at the bound, not run ahead.
  for (std::size_t consumed = 0; consumed < 5; ++consumed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::size_t made_batches = (dataset->made.load() + 15) / 16;
    EXPECT_LE(made_batches, consumed + loader.max_batches_in_memory()) << consumed;
    ASSERT_TRUE(loader.next());
  }
  EXPECT_GE(dataset->made.load(), 16u * 6);  // it did prefetch
}

}  // namespace
}  // namespace tp::data
