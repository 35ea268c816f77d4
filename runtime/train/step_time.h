// Where each optimizer step's time goes. Every moment between the start of an epoch's first step and the
// end of its last belongs to exactly one part of exactly one step, so a step's parts add up to its time.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>

namespace tp::train {

enum class StepPart {
  data_wait,         // waiting for the next batch, and its copy to the device
  forward_backward,  // forward pass, loss and backward pass of the step's batches
  allreduce,         // gradient averaging still running after backward (not hidden behind it), and the
                     // ranks' agreement on whether to stop
  optimizer,         // learning rate, unscaling, clipping, the optimizer step and the step's records
  checkpoint,        // checkpoints written within the step
};
inline constexpr std::size_t kStepParts = 5;
// "data_wait", "forward_backward", "allreduce", "optimizer", "checkpoint": steps.jsonl's keys, with "_s".
const char* step_part_name(StepPart part);

// Seconds of a step, by part.
struct StepTimes {
  std::array<double, kStepParts> seconds{};
  double& operator[](StepPart part) { return seconds[static_cast<std::size_t>(part)]; }
  double operator[](StepPart part) const { return seconds[static_cast<std::size_t>(part)]; }
  double total() const;
  StepTimes& operator+=(const StepTimes& other);
};

// Splits wall time into steps and parts: time goes to the part last entered.
class StepTimer {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts a step now, in `part` (at each epoch's start: what came between epochs is no step's).
  void start(StepPart part = StepPart::data_wait);
  // From now on, time goes to `part`.
  void enter(StepPart part);
  // Ends the step now and starts the next, in the data wait. `seconds` is the step's wall time, measured
  // from its start independently of the parts.
  struct Step {
    double seconds = 0;
    StepTimes times;
  };
  Step end_step();

 private:
  void charge(Clock::time_point now);

  Clock::time_point step_start_ = Clock::now();
  Clock::time_point part_start_ = step_start_;
  StepPart part_ = StepPart::data_wait;
  StepTimes times_;
};

}  // namespace tp::train
