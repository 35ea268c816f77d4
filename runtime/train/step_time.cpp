#include "train/step_time.h"

#include <numeric>

namespace tp::train {

const char* step_part_name(StepPart part) {
  switch (part) {
    case StepPart::data_wait:
      return "data_wait";
    case StepPart::forward_backward:
      return "forward_backward";
    case StepPart::allreduce:
      return "allreduce";
    case StepPart::optimizer:
      return "optimizer";
    case StepPart::checkpoint:
      return "checkpoint";
  }
  return "?";
}

double StepTimes::total() const {
  return std::accumulate(seconds.begin(), seconds.end(), 0.0);
}

StepTimes& StepTimes::operator+=(const StepTimes& other) {
  for (std::size_t part = 0; part < kStepParts; ++part) seconds[part] += other.seconds[part];
  return *this;
}

void StepTimer::start(StepPart part) {
  step_start_ = part_start_ = Clock::now();
  part_ = part;
  times_ = {};
}

void StepTimer::charge(Clock::time_point now) {
  times_[part_] += std::chrono::duration<double>(now - part_start_).count();
  part_start_ = now;
}

void StepTimer::enter(StepPart part) {
  charge(Clock::now());
  part_ = part;
}

StepTimer::Step StepTimer::end_step() {
  const auto now = Clock::now();
  charge(now);
  const Step step{std::chrono::duration<double>(now - step_start_).count(), times_};
  step_start_ = now;
  part_ = StepPart::data_wait;
  times_ = {};
  return step;
}

}  // namespace tp::train
