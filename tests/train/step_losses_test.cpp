// Losses kept where they were computed and read at read points (train/step_losses.h), on the CPU.
#include "train/step_losses.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

namespace tp::train {
namespace {

TEST(StepLosses, StepRecordsWaitForTheReadAndGetTheMeanOfTheirBatches) {
  StepLosses losses(0);
  double loss_sum = 0, count = 0;
  losses.add(torch::tensor(1.0f), 4, 7, 0.1);  // step 7: two batches (gradient accumulation)
  losses.add(torch::tensor(3.0f), 2, 7, 0.1);
  EXPECT_TRUE(losses.end_step({7, 0.1, 0.0}, 6).empty());  // not read yet
  losses.add(torch::tensor(0.5f), 4, 8, 0.05);
  EXPECT_EQ(losses.read(loss_sum, count), std::nullopt);
  EXPECT_DOUBLE_EQ(loss_sum, 4.0 + 6.0 + 2.0);
  EXPECT_DOUBLE_EQ(count, 10.0);

  StepRecord eight(8, 0.05, 0.0);
  eight.seconds = 0.25;  // timed after the read
  const std::vector<StepLosses::Step> complete = losses.end_step(eight, 4);
  ASSERT_EQ(complete.size(), 2u);
  EXPECT_EQ(complete[0].record.step, 7);
  EXPECT_DOUBLE_EQ(complete[0].record.train_loss, 2.0);
  EXPECT_EQ(complete[0].samples, 6);
  EXPECT_EQ(complete[1].record.step, 8);
  EXPECT_DOUBLE_EQ(complete[1].record.train_loss, 0.5);
  EXPECT_DOUBLE_EQ(complete[1].record.seconds, 0.25);
  EXPECT_DOUBLE_EQ(complete[1].record.lr, 0.05);
}

// A restart reads at other steps than the run it resumes: its totals must come out the same to the bit.
TEST(StepLosses, TheTotalsAreTheSameWhereverTheReadsAre) {
  const std::vector<float> values{0.1f, 0.7f, 1.3f, 1e-9f, 3.3f, 0.2f, 7.1f};
  double once_sum = 0, once_count = 0, each_sum = 0, each_count = 0;
  StepLosses once(0), each(0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto step = static_cast<std::int64_t>(i + 1);
    once.add(torch::tensor(values[i]), 3 + static_cast<std::int64_t>(i), step, 0.1);
    each.add(torch::tensor(values[i]), 3 + static_cast<std::int64_t>(i), step, 0.1);
    each.read(each_sum, each_count);
  }
  once.read(once_sum, once_count);
  EXPECT_EQ(once_sum, each_sum);
  EXPECT_EQ(once_count, each_count);
}

TEST(StepLosses, ALossThatIsNotFiniteIsFoundWhenReadNamingItsStep) {
  StepLosses losses(2);
  double loss_sum = 0, count = 0;
  losses.add(torch::tensor(0.7f), 8, 11, 0.2);
  losses.end_step({11, 0.2, 0.0}, 8);
  losses.add(torch::tensor(std::nanf("")), 8, 12, 0.4);  // nothing happens before the read
  losses.end_step({12, 0.4, 0.0}, 8);
  losses.add(torch::tensor(std::numeric_limits<float>::infinity()), 8, 13, 0.4);
  EXPECT_EQ(losses.read(loss_sum, count), "the loss became nan at epoch 3 step 12: lower train.lr (now 0.4)");
}

TEST(ReadPoints, TheFirstStepAndAnEpochsLastAreReadPoints) {
  ReadPoints reads;
  EXPECT_TRUE(reads.due(1, false));
  EXPECT_EQ(reads.propose(), 1);  // no step timed yet
  reads.agreed(1, 2 * 50, 2);
  EXPECT_FALSE(reads.due(50, false));
  EXPECT_TRUE(reads.due(50, true));
  EXPECT_TRUE(reads.due(51, false));
}

TEST(ReadPoints, TheNextIsAboutASecondAwayAtTheMeanOfTheRanksProposals) {
  ReadPoints reads;
  reads.agreed(1, 1, 1);
  for (int i = 0; i < 4; ++i) reads.step_took(0.05);
  EXPECT_EQ(reads.propose(), 20);  // 4 steps in 0.2 s
  reads.agreed(5, 20 + 41, 2);     // another rank proposed 41: (20 + 41) / 2 = 30 on every rank
  EXPECT_FALSE(reads.due(34, false));
  EXPECT_TRUE(reads.due(35, false));
  reads.step_took(3.0);  // slow steps: every step
  EXPECT_EQ(reads.propose(), 1);
  reads.agreed(35, 2, 2);
  EXPECT_TRUE(reads.due(36, false));
  reads.step_took(1e-6);  // fast steps: at most kMostSteps apart
  EXPECT_EQ(reads.propose(), ReadPoints::kMostSteps);
}

}  // namespace
}  // namespace tp::train
