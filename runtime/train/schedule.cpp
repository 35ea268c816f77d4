#include "train/schedule.h"

#include <algorithm>
#include <cmath>

namespace tp::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Cosine interpolation from `start` (progress 0) to `end` (progress 1).
double cosine(double start, double end, double progress) {
  return end + (start - end) * (1.0 + std::cos(kPi * progress)) / 2.0;
}

}  // namespace

double learning_rate(const ScheduleOptions& options, std::int64_t step) {
  const double total = static_cast<double>(std::max<std::int64_t>(options.total_steps, 1));
  const double position = std::clamp(static_cast<double>(step) / total, 0.0, 1.0);
  const double peak = options.peak_lr;
  const double warmup = options.warmup;
  if (options.kind == "one_cycle") {
    if (warmup > 0 && position < warmup) return cosine(peak / 25.0, peak, position / warmup);
    return cosine(peak, peak / 1e5, warmup >= 1 ? 1.0 : (position - warmup) / (1.0 - warmup));
  }
  if (options.kind == "cosine") {
    if (warmup > 0 && position < warmup) return peak * position / warmup;
    return cosine(peak, 0.0, warmup >= 1 ? 1.0 : (position - warmup) / (1.0 - warmup));
  }
  if (options.kind == "step") {
    const std::int64_t epoch = step / std::max<std::int64_t>(options.steps_per_epoch, 1);
    return peak * std::pow(options.step_gamma, static_cast<double>(epoch / options.step_every));
  }
  return peak;
}

}  // namespace tp::train
