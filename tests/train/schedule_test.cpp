#include "train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tp::train {
namespace {

TEST(Schedule, ConstantIsThePeak) {
  const ScheduleOptions options{spec::Schedule::constant, 0.1, 0.25, 100};
  EXPECT_DOUBLE_EQ(learning_rate(options, 0), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(options, 99), 0.1);
}

TEST(Schedule, OneCycleMatchesFastaiAtChosenSteps) {
  const ScheduleOptions options{spec::Schedule::one_cycle, 0.01, 0.25, 1000};
  EXPECT_NEAR(learning_rate(options, 0), 0.01 / 25, 1e-12);       // starts at lr/div
  EXPECT_NEAR(learning_rate(options, 250), 0.01, 1e-12);          // peak at pct_start
  // Halfway through the warmup: the cosine midpoint of lr/25 and lr.
  EXPECT_NEAR(learning_rate(options, 125), (0.01 / 25 + 0.01) / 2, 1e-12);
  // Halfway through the annealing: the midpoint of lr and lr/1e5.
  EXPECT_NEAR(learning_rate(options, 625), (0.01 + 0.01 / 1e5) / 2, 1e-12);
  EXPECT_NEAR(learning_rate(options, 1000), 0.01 / 1e5, 1e-15);   // ends at lr/final_div
}

TEST(Schedule, CosineWarmsUpLinearlyThenDecaysToZero) {
  const ScheduleOptions options{spec::Schedule::cosine, 0.2, 0.1, 100};
  EXPECT_DOUBLE_EQ(learning_rate(options, 0), 0.0);
  EXPECT_NEAR(learning_rate(options, 5), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(options, 10), 0.2, 1e-12);
  EXPECT_NEAR(learning_rate(options, 55), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(options, 100), 0.0, 1e-12);
}

TEST(Schedule, StepDecaysByGammaEveryNEpochsLikeStepLR) {
  // 10 steps per epoch, decay by 0.5 every 3 epochs: lr_epoch = 0.1 * 0.5^floor(epoch / 3).
  ScheduleOptions options{spec::Schedule::step, 0.1, 0.25, 100};
  options.per_epoch = 10;
  options.step_every = 3;
  options.step_gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(options, 0), 0.1);    // no warmup
  EXPECT_DOUBLE_EQ(learning_rate(options, 29), 0.1);   // last step of epoch 2
  EXPECT_DOUBLE_EQ(learning_rate(options, 30), 0.05);  // epoch 3
  EXPECT_DOUBLE_EQ(learning_rate(options, 59), 0.05);
  EXPECT_DOUBLE_EQ(learning_rate(options, 60), 0.025);
  EXPECT_DOUBLE_EQ(learning_rate(options, 99), 0.0125);  // epoch 9
}

}  // namespace
}  // namespace tp::train
