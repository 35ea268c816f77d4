#include "train/metric_tracker.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "common/error.h"

namespace tp::train {

double metric_value(const EpochMetrics& m, const std::string& metric) {
  if (metric == "valid_loss") return m.valid_loss;
  if (metric == "train_loss") return m.train_loss;
  if (metric == "accuracy") return m.valid_accuracy;
  if (metric == "error_rate") return m.error_rate;
  if (metric == "top_k_accuracy") return m.top_k_accuracy;
  if (metric == "mae") return m.mae;
  if (metric == "mse") return m.mse;
  fail(ExitCode::internal, "no per-epoch metric is named '{}'", metric);
}

double require_metric(const std::string& setting, const std::string& metric, const EpochMetrics& m) {
  const double value = metric_value(m, metric);
  if (std::isfinite(value)) return value;
  const bool needs_validation = metric != "train_loss" && metric != "top_k_accuracy";
  fail(ExitCode::usage, "{} = \"{}\": epoch {} reported no {} ({}): watch another metric", setting, metric, m.epoch,
       metric,
       needs_validation               ? "the run has no validation data: set data.valid above 0 or data.valid_source"
       : metric == "top_k_accuracy" ? "there are not more classes than train.top_k"
                                    : "it is not finite");
}

namespace {

bool higher_is_better(const std::string& metric, spec::MetricMode mode) {
  switch (mode) {
    case spec::MetricMode::min: return false;
    case spec::MetricMode::max: return true;
    case spec::MetricMode::automatic: return metric == "accuracy" || metric == "top_k_accuracy";
  }
  spec::unhandled(mode);
}

}  // namespace

MetricTracker::MetricTracker(std::string setting, std::string metric, spec::MetricMode mode, double min_delta)
    : setting_(std::move(setting)),
      metric_(std::move(metric)),
      higher_is_better_(higher_is_better(metric_, mode)),
      min_delta_(min_delta) {}

bool MetricTracker::add(const EpochMetrics& m) {
  const double value = require_metric(setting_, metric_, m);
  last_ = MetricAt{m.epoch, value};
  const bool improved =
      !best_ || (higher_is_better_ ? value > best_->value + min_delta_ : value < best_->value - min_delta_);
  if (improved) {
    best_ = last_;
    epochs_without_improvement_ = 0;
  } else {
    ++epochs_without_improvement_;
  }
  return improved;
}

std::optional<std::string> early_stop_verdict(const MetricTracker& tracker, std::int64_t patience) {
  if (patience <= 0 || tracker.epochs_without_improvement() < patience) return std::nullopt;
  return fmt::format("stopped at epoch {}: {} {:.4g} did not improve by {:g} for {} epoch{}; best {:.4g} at epoch {}",
                     tracker.last()->epoch, tracker.metric(), tracker.last()->value, tracker.min_delta(), patience,
                     patience == 1 ? "" : "s", tracker.best()->value, tracker.best()->epoch);
}

}  // namespace tp::train
