// trainpoint's DistributedDataParallel: gradients are averaged over ranks in buckets whose
// all-reduce starts from autograd hooks as soon as the bucket's last gradient is accumulated, so
// communication overlaps the rest of backward. As in PyTorch's DDP, buckets are filled in reverse
// order of parameter registration (roughly the order backward produces gradients), the first
// bucket is small so communication starts early, and buckets are launched strictly in index order
// so that every rank issues the same collectives in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace tp::dist {

struct BucketOptions {
  std::size_t first_bucket_bytes = 1 << 20;
  std::size_t bucket_bytes = 25 << 20;
  // Parameters that get no gradient in a step count as zero instead of failing the step.
  bool allow_unused_parameters = false;
};

struct StepTiming {
  std::chrono::steady_clock::time_point first_launch;  // first bucket's all-reduce started
  std::chrono::steady_clock::time_point backward_done;  // finish() called after backward returned
  std::chrono::steady_clock::time_point all_done;       // every bucket reduced and copied back
};

class GradientSynchronizer {
 public:
  // `names[i]` names `parameters[i]` in messages. Parameters must be leaves that require grad.
  GradientSynchronizer(std::vector<at::Tensor> parameters, std::vector<std::string> names,
                       Communicator& communicator, BucketOptions options = {});
  ~GradientSynchronizer();
  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  // When off (gradient accumulation steps), hooks do nothing and finish() leaves gradients local.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  // After backward: waits for every bucket, averages, and writes the results into .grad.
  // Throws tp::Error (ExitCode::model) naming parameters that got no gradient.
  void finish();

  std::size_t bucket_count() const { return buckets_.size(); }
  const StepTiming& last_timing() const { return timing_; }

 private:
  struct Bucket;
  void on_gradient_ready(std::size_t parameter_index);
  void launch_ready_buckets();
  void launch(Bucket& bucket);

  std::vector<at::Tensor> parameters_;
  std::vector<std::string> names_;
  Communicator& communicator_;
  BucketOptions options_;
  bool enabled_ = true;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<std::size_t> bucket_of_;  // parameter index -> bucket index
  std::vector<bool> ready_;             // parameter index -> gradient accumulated this step
  std::size_t next_to_launch_ = 0;
  struct Hook;
  std::vector<Hook> hooks_;  // keeps the hooked grad accumulators alive, to unhook on destruction
  std::mutex mutex_;         // hooks may run on autograd's device threads
  StepTiming timing_;
};

}  // namespace tp::dist
