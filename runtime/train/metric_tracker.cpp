#include "train/metric_tracker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace tp::train {
namespace {

constexpr std::string_view kClassF1 = "f1:";

// The class that an "f1:<class>" metric names; nothing for the other metrics.
std::optional<std::string> class_of_f1(const std::string& metric) {
  if (metric.compare(0, kClassF1.size(), kClassF1) != 0) return std::nullopt;
  return metric.substr(kClassF1.size());
}

bool higher_is_better(const std::string& metric, spec::MetricMode mode) {
  switch (mode) {
    case spec::MetricMode::min: return false;
    case spec::MetricMode::max: return true;
    case spec::MetricMode::automatic:
      return metric == "accuracy" || metric == "top_k_accuracy" || metric == "f1" || class_of_f1(metric).has_value();
  }
  spec::unhandled(mode);
}

}  // namespace

double metric_value(const EpochMetrics& m, const std::string& metric) {
  if (const std::optional<std::string> named = class_of_f1(metric)) {
    for (const auto& [name, value] : m.class_f1) {
      if (name == *named) return value;
    }
    return std::nan("");
  }
  if (metric == "f1") return m.f1;
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
  const bool validated = std::isfinite(m.valid_loss);
  fail(ExitCode::usage, "{} = \"{}\": epoch {} reported no {} ({}): watch another metric", setting, metric, m.epoch,
       metric,
       needs_validation && !validated ? "the run has no validation data: set data.valid above 0 or data.valid_source"
       : metric == "top_k_accuracy"   ? "there are not more classes than train.top_k"
       : class_of_f1(metric)          ? "the class was neither in the validation data nor predicted"
                                      : "it is not finite");
}

void check_metric_of_classes(const std::string& setting, const std::string& metric,
                             const std::vector<std::string>& class_names) {
  const std::optional<std::string> named = class_of_f1(metric);
  if (!named || std::find(class_names.begin(), class_names.end(), *named) != class_names.end()) return;
  fail(ExitCode::usage, "{} = \"{}\": the data has no class '{}'; its classes are: {}", setting, metric, *named,
       fmt::join(class_names, ", "));
}


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

LrPlateau::LrPlateau(const spec::LrPlateauSpec& spec, double peak_lr)
    : tracker_("train.reduce_lr_on_plateau.monitor", spec.monitor, spec.mode, spec.min_delta),
      patience_(spec.patience),
      factor_(spec.factor),
      floor_(spec.min_lr / peak_lr) {}

bool LrPlateau::add(const EpochMetrics& m) {
  waited_ = tracker_.add(m) ? 0 : waited_ + 1;
  if (waited_ < patience_) return false;
  waited_ = 0;
  if (multiplier() <= floor_) return false;  // at min_lr already
  ++reductions_;
  return true;
}

double LrPlateau::multiplier() const {
  return std::max(std::pow(factor_, static_cast<double>(reductions_)), floor_);
}

std::optional<std::string> early_stop_verdict(const MetricTracker& tracker, std::int64_t patience) {
  if (patience <= 0 || tracker.epochs_without_improvement() < patience) return std::nullopt;
  return fmt::format("stopped at epoch {}: {} {:.4g} did not improve by {:g} for {} epoch{}; best {:.4g} at epoch {}",
                     tracker.last()->epoch, tracker.metric(), tracker.last()->value, tracker.min_delta(), patience,
                     patience == 1 ? "" : "s", tracker.best()->value, tracker.best()->epoch);
}

}  // namespace tp::train
