// The best value of one per-epoch metric so far and the epochs since it improved, as fastai's TrackerCallback
// keeps them: early stopping (train.early_stop) and the kept best model (checkpoint.keep_best) each watch one.
// Rank 0 keeps the trackers (they are replayed from metrics.jsonl on a resume, so a restarted run decides as
// an uninterrupted one did) and shares their decisions, so that every rank stops at the same epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "spec/spec.h"
#include "train/metrics.h"

namespace tp::train {

// An epoch's value of a metric and the epoch.
struct MetricAt {
  std::int64_t epoch = 0;
  double value = 0;
};

class MetricTracker {
 public:
  // `setting` is the spec key that chose `metric`, for messages. Mode auto: higher is better for the
  // accuracies, lower for the losses and errors.
  MetricTracker(std::string setting, std::string metric, spec::MetricMode mode, double min_delta);

  // Adds epoch `m`; returns whether it is the new best. Throws as require_metric.
  bool add(const EpochMetrics& m);

  const std::string& metric() const { return metric_; }
  const std::optional<MetricAt>& best() const { return best_; }
  const std::optional<MetricAt>& last() const { return last_; }
  std::int64_t epochs_without_improvement() const { return epochs_without_improvement_; }
  double min_delta() const { return min_delta_; }

 private:
  std::string setting_;
  std::string metric_;
  bool higher_is_better_;
  double min_delta_;
  std::optional<MetricAt> best_;
  std::optional<MetricAt> last_;
  std::int64_t epochs_without_improvement_ = 0;
};

// `m`'s value of `metric`, as metrics.jsonl names it; NaN when the epoch has none.
double metric_value(const EpochMetrics& m, const std::string& metric);
// `m`'s value of `metric`, which the spec key `setting` watches. Throws tp::Error(usage) when the run does not
// report it (valid_loss without validation data, top_k_accuracy with too few classes).
double require_metric(const std::string& setting, const std::string& metric, const EpochMetrics& m);

// Early stopping's verdict after the tracker's last epoch: why the run stops there, such as "stopped at epoch
// 7: valid_loss 0.412 did not improve by 0.001 for 3 epochs; best 0.398 at epoch 4"; nothing while it goes on.
std::optional<std::string> early_stop_verdict(const MetricTracker& tracker, std::int64_t patience);

}  // namespace tp::train
