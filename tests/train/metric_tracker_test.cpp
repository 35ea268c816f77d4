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

}  // namespace
}  // namespace tp::train
