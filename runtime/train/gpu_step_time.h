// The parts of each optimizer step as the GPU spends them (StepTimer's parts), from CUDA events recorded on the
// training stream wherever the step changes part, so that timing a step never makes the host wait for the GPU
// (a synchronisation per step idles a GPU whose host would otherwise run ahead). A step's times are read once
// the host has waited for the GPU anyway: at a read point of the losses (train/step_losses.h), after which the
// events of every step before it have completed.
//
// What the parts mean there: each is the GPU's time between the events that open and close it. data_wait is
// then the batch's copy to the GPU plus the time the GPU sat idle because the host was still waiting for the
// batch; a part the host queues faster than the GPU runs it is charged as the GPU runs it.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>

#include "train/step_time.h"

namespace tp::train {

class GpuStepTimer {
 public:
  // A timer for `device`: none on the CPU, nor in a build without CUDA (the host's StepTimer then times).
  static std::unique_ptr<GpuStepTimer> on(c10::Device device);
  ~GpuStepTimer();
  GpuStepTimer(const GpuStepTimer&) = delete;
  GpuStepTimer& operator=(const GpuStepTimer&) = delete;

  // An epoch's first step starts now, waiting for data.
  void start();
  // From here on the step's work is `part`'s.
  void enter(StepPart part);
  // Step number `step` ends here; the next starts, waiting for data.
  void end_step(std::int64_t step);
  // The times of `step`, which ended and was not taken yet (steps are taken in the order they ended): waits
  // for its last event, which a read point has left with little or nothing before it.
  StepTimer::Step take(std::int64_t step);

 private:
  struct Events;
  explicit GpuStepTimer(std::unique_ptr<Events> events);
  std::unique_ptr<Events> events_;
};

}  // namespace tp::train
