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

double learning_rate(const ScheduleOptions& options, double position_in_run) {
  const double position = options.length > 0 ? std::clamp(position_in_run / options.length, 0.0, 1.0) : 1.0;
  const double peak = options.peak_lr;
  const double warmup = options.warmup;
  switch (options.kind) {
    case spec::Schedule::constant:
      return peak;
    case spec::Schedule::one_cycle:
      if (warmup > 0 && position < warmup) return cosine(peak / 25.0, peak, position / warmup);
      return cosine(peak, peak / 1e5, warmup >= 1 ? 1.0 : (position - warmup) / (1.0 - warmup));
    case spec::Schedule::cosine:
      if (warmup > 0 && position < warmup) return peak * position / warmup;
      return cosine(peak, 0.0, warmup >= 1 ? 1.0 : (position - warmup) / (1.0 - warmup));
    case spec::Schedule::step: {
      const auto epoch = static_cast<std::int64_t>(std::floor(position_in_run / options.per_epoch));
      return peak * std::pow(options.step_gamma, static_cast<double>(epoch / options.step_every));
    }
  }
  spec::unhandled(options.kind);
}

}  // namespace tp::train
