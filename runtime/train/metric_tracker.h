// The best value of one per-epoch metric so far and the epochs since it improved, as fastai's TrackerCallback
// keeps them: early stopping (train.early_stop), the kept best model (checkpoint.keep_best) and the lr's
// reductions on a plateau (train.reduce_lr_on_plateau) each watch one.
// Rank 0 keeps the trackers (they are replayed from metrics.jsonl on a resume, so a restarted run decides as
// an uninterrupted one did) and shares their decisions, so that every rank stops at the same epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// ReduceLROnPlateau (train.reduce_lr_on_plateau), as fastai's: after `patience` epochs in a row without an
// improvement the lr is multiplied by `factor` and the count starts again; the best value is kept across
// reductions. Fed on rank 0 like the trackers, which shares each reduction with the other ranks.
class LrPlateau {
 public:
  LrPlateau(const spec::LrPlateauSpec& spec, double peak_lr);

  // Adds epoch `m`; returns whether the lr is reduced after it. Throws as require_metric.
  bool add(const EpochMetrics& m);
  // One more reduction, decided on rank 0 (add), on a rank that did not decide it.
  void reduce() { ++reductions_; }

  std::int64_t reductions() const { return reductions_; }
  // What the schedule's lr is multiplied by: factor^reductions, but not below min_lr / peak lr.
  double multiplier() const;
  const MetricTracker& tracker() const { return tracker_; }

 private:
  MetricTracker tracker_;
  std::int64_t patience_;
  double factor_;
  double floor_;  // min_lr / peak lr
  std::int64_t waited_ = 0;
  std::int64_t reductions_ = 0;
};

// `m`'s value of `metric`, as metrics.jsonl names it (f1:<class> its class_f1 of that class); NaN when the
// epoch has none.
double metric_value(const EpochMetrics& m, const std::string& metric);
// `m`'s value of `metric`, which the spec key `setting` watches. Throws tp::Error(usage) when the run does not
// report it (valid_loss without validation data, top_k_accuracy with too few classes).
double require_metric(const std::string& setting, const std::string& metric, const EpochMetrics& m);

// Throws tp::Error(usage) when `metric` is the F1 of a class ("f1:<class>") that is not among `class_names`.
void check_metric_of_classes(const std::string& setting, const std::string& metric,
                             const std::vector<std::string>& class_names);

// Early stopping's verdict after the tracker's last epoch: why the run stops there, such as "stopped at epoch
// 7: valid_loss 0.412 did not improve by 0.001 for 3 epochs; best 0.398 at epoch 4"; nothing while it goes on.
std::optional<std::string> early_stop_verdict(const MetricTracker& tracker, std::int64_t patience);

}  // namespace tp::train
