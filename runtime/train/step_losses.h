// Training losses left on the device where they were computed and read in one transfer at read points, so
// that a GPU is not held up by a host synchronisation before every backward; and which steps are read points.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "train/metrics.h"

namespace tp::train {

// An epoch's batch losses, and its step records waiting for them.
class StepLosses {
 public:
  explicit StepLosses(std::int64_t epoch) : epoch_(epoch) {}

  // A batch's mean loss (a 0-dim tensor on any device) over `samples` samples, in step `step` (1-based, as in
  // steps.jsonl) at `lr`.
  void add(const at::Tensor& loss, std::int64_t samples, std::int64_t step, double lr);
  // Copies every loss not read yet to the host at once. Adds each batch's loss x samples to `loss_sum` and
  // its samples to `count`, batch after batch in order, so that the sums do not depend on where the reads
  // are. Returns, when a loss is not finite, the training error naming the first such batch's step.
  std::optional<std::string> read(double& loss_sum, double& count);

  struct Step {
    StepRecord record;
    std::int64_t samples = 0;  // this rank's
  };
  // Ends the step whose batches were added last, with its record (train_loss is filled in once its losses
  // are read). Returns the steps complete now, their losses read, in order.
  std::vector<Step> end_step(const StepRecord& record, std::int64_t samples);

 private:
  struct Batch {
    at::Tensor loss;
    std::int64_t samples;
  };
  struct Pending {
    std::int64_t step;
    double lr;
    std::vector<Batch> unread;
    double loss_sum = 0;  // of its batches' losses, once read
    int batches = 0;
    std::optional<Step> ended;
  };
  std::int64_t epoch_;
  std::deque<Pending> steps_;
};

// Which optimizer steps are read points: where the losses are read and the ranks agree on stopping. The same
// steps on every rank, about one a second: at each read point, each rank proposes how many steps until the
// next from its own step times since the previous one, and the ranks take the mean of their proposals. A
// run's first step and each epoch's last are read points too.
class ReadPoints {
 public:
  static constexpr double kSecondsBetween = 1.0;
  static constexpr std::int64_t kMostSteps = 100;

  // Whether step `step` is a read point.
  bool due(std::int64_t step, bool ends_epoch) const { return ends_epoch || step >= next_; }
  // A step took `seconds`.
  void step_took(double seconds);
  // This rank's proposal: the steps that take about kSecondsBetween at the pace of the steps since the
  // previous read point; 1 before any step was timed.
  std::int64_t propose() const;
  // The ranks agreed at read point `step`: `proposals` is the sum of the proposals of `world_size` ranks.
  void agreed(std::int64_t step, std::int64_t proposals, int world_size);

 private:
  std::int64_t next_ = 0;
  std::int64_t steps_ = 0;  // timed since the previous read point
  double seconds_ = 0;
};

}  // namespace tp::train
