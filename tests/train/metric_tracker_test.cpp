// The trackers behind early stopping and checkpoint.keep_best: what counts as an improvement, when the run
// stops and what it says, and the clear failure of a metric the run does not report.
#include "train/metric_tracker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error.h"

namespace tp::train {
namespace {

EpochMetrics epoch_with(std::int64_t epoch, double valid_loss, double accuracy) {
  EpochMetrics m;
  m.epoch = epoch;
  m.train_loss = 1.0;
  m.valid_loss = valid_loss;
  m.valid_accuracy = accuracy;
  m.error_rate = 1 - accuracy;
  m.top_k_accuracy = m.mae = m.mse = std::nan("");
  return m;
}

TEST(MetricTracker, LossesImproveDownwardsAndAccuraciesUpwardsByMoreThanMinDelta) {
  MetricTracker loss("train.early_stop.monitor", "valid_loss", spec::MetricMode::automatic, 0.01);
  EXPECT_TRUE(loss.add(epoch_with(1, 0.50, 0.6)));
  EXPECT_FALSE(loss.add(epoch_with(2, 0.495, 0.7)));  // better, but by less than min_delta
  EXPECT_TRUE(loss.add(epoch_with(3, 0.40, 0.7)));
  EXPECT_EQ(loss.best()->epoch, 3);
  EXPECT_DOUBLE_EQ(loss.best()->value, 0.40);

  MetricTracker accuracy("checkpoint.keep_best", "accuracy", spec::MetricMode::automatic, 0.0);
  EXPECT_TRUE(accuracy.add(epoch_with(1, 0.5, 0.6)));
  EXPECT_FALSE(accuracy.add(epoch_with(2, 0.4, 0.6)));  // equal is no improvement
  EXPECT_TRUE(accuracy.add(epoch_with(3, 0.6, 0.65)));
  EXPECT_FALSE(accuracy.add(epoch_with(4, 0.3, 0.64)));
  EXPECT_EQ(accuracy.best()->epoch, 3);

  MetricTracker forced_max("train.early_stop.monitor", "valid_loss", spec::MetricMode::max, 0.0);
  EXPECT_TRUE(forced_max.add(epoch_with(1, 0.5, 0)));
  EXPECT_TRUE(forced_max.add(epoch_with(2, 0.6, 0)));
}

TEST(MetricTracker, EarlyStoppingStopsAfterPatienceEpochsWithoutImprovementAndSaysWhy) {
  MetricTracker tracker("train.early_stop.monitor", "valid_loss", spec::MetricMode::automatic, 0.001);
  const std::vector<double> losses{0.5, 0.45, 0.398, 0.41, 0.40, 0.399, 0.2};
  std::vector<std::string> verdicts;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    tracker.add(epoch_with(static_cast<std::int64_t>(i + 1), losses[i], 0.5));
    const auto verdict = early_stop_verdict(tracker, 3);
    if (verdict) verdicts.push_back(*verdict);
  }
  ASSERT_FALSE(verdicts.empty());
  EXPECT_EQ(verdicts.front(),
            "stopped at epoch 6: valid_loss 0.399 did not improve by 0.001 for 3 epochs; best 0.398 at epoch 3");
  EXPECT_FALSE(early_stop_verdict(tracker, 0)) << "patience 0 is off";
}

TEST(MetricTracker, AMetricTheRunDoesNotReportIsAUsageErrorNamingTheSettingAndWhatToDo) {
  MetricTracker tracker("train.early_stop.monitor", "valid_loss", spec::MetricMode::automatic, 0.0);
  try {
    tracker.add(epoch_with(1, std::nan(""), std::nan("")));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_NE(std::string(error.what()).find("train.early_stop.monitor = \"valid_loss\": epoch 1 reported no "
                                             "valid_loss (the run has no validation data"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(require_metric("checkpoint.keep_best", "top_k_accuracy", epoch_with(2, 0.1, 0.5)), Error);
  EXPECT_DOUBLE_EQ(require_metric("checkpoint.keep_best", "error_rate", epoch_with(2, 0.1, 0.75)), 0.25);
}

TEST(MetricTracker, F1ImprovesUpwardsAndOneClassIsWatchedByItsName) {
  auto with_f1 = [](std::int64_t epoch, double cat, double dog) {
    EpochMetrics m = epoch_with(epoch, 0.5, 0.5);
    m.class_f1 = {{"cat", cat}, {"dog", dog}};
    m.f1 = macro_average(m.class_f1);
    return m;
  };
  MetricTracker mean("train.early_stop.monitor", "f1", spec::MetricMode::automatic, 0.0);
  MetricTracker dog("checkpoint.keep_best", "f1:dog", spec::MetricMode::automatic, 0.0);
  EXPECT_TRUE(mean.add(with_f1(1, 0.5, 0.5)));
  EXPECT_TRUE(dog.add(with_f1(1, 0.5, 0.5)));
  EXPECT_TRUE(mean.add(with_f1(2, 0.9, 0.3)));  // the mean rises, the dogs fall
  EXPECT_FALSE(dog.add(with_f1(2, 0.9, 0.3)));
  EXPECT_TRUE(dog.add(with_f1(3, 0.2, 0.7)));
  EXPECT_EQ(dog.best()->epoch, 3);
  EXPECT_DOUBLE_EQ(dog.best()->value, 0.7);
  EXPECT_EQ(mean.best()->epoch, 2);
  try {
    dog.add(with_f1(4, 0.9, std::nan("")));
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("epoch 4 reported no f1:dog (the class was neither in the validation "
                                             "data nor predicted)"),
              std::string::npos)
        << error.what();
  }
}

// fastai's ReduceLROnPlateau: `patience` epochs without improvement reduce the lr, the count starts again, the
// best value stays, and min_lr is a floor.
TEST(LrPlateau, ReducesAfterPatienceEpochsWithoutImprovementDownToMinLr) {
  spec::LrPlateauSpec settings{2, "valid_loss", spec::MetricMode::automatic, 0.01, 0.5, 0.0};
  LrPlateau plateau(settings, 0.1);
  const std::vector<double> losses{1.0, 0.9, 0.895, 0.899, 0.85, 0.86, 0.87, 0.88, 0.89, 0.7};
  std::vector<std::int64_t> reduced_after;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    if (plateau.add(epoch_with(static_cast<std::int64_t>(i + 1), losses[i], 0.5))) reduced_after.push_back(i + 1);
  }
  // Epochs 3 and 4 do not beat 0.9 by 0.01; 5 does; 6 and 7, then 8 and 9 do not (against 0.85).
  EXPECT_EQ(reduced_after, (std::vector<std::int64_t>{4, 7, 9}));
  EXPECT_EQ(plateau.reductions(), 3);
  EXPECT_DOUBLE_EQ(plateau.multiplier(), 0.125);
  EXPECT_EQ(plateau.tracker().best()->epoch, 10);

  settings.min_lr = 0.03;  // the peak lr 0.1 goes to 0.05, then stops at 0.03
  LrPlateau floored(settings, 0.1);
  for (std::int64_t epoch = 1; epoch <= 9; ++epoch) floored.add(epoch_with(epoch, 1.0, 0.5));
  EXPECT_EQ(floored.reductions(), 2);
  EXPECT_DOUBLE_EQ(floored.multiplier(), 0.3);

  // Another rank takes rank 0's reductions as they are told.
  LrPlateau told(settings, 0.1);
  told.reduce();
  EXPECT_DOUBLE_EQ(told.multiplier(), 0.5);
}

TEST(MetricTracker, AClassTheDataDoesNotHaveIsNamedWithTheClassesItHas) {
  EXPECT_NO_THROW(check_metric_of_classes("train.early_stop.monitor", "f1:dog", {"cat", "dog"}));
  EXPECT_NO_THROW(check_metric_of_classes("train.early_stop.monitor", "accuracy", {"cat", "dog"}));
  try {
    check_metric_of_classes("checkpoint.keep_best", "f1:dgo", {"cat", "dog"});
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_EQ(std::string(error.what()),
              "checkpoint.keep_best = \"f1:dgo\": the data has no class 'dgo'; its classes are: cat, dog");
  }
}

}  // namespace
}  // namespace tp::train
