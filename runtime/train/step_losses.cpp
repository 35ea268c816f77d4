#include "train/step_losses.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace tp::train {

void StepLosses::add(const at::Tensor& loss, std::int64_t samples, std::int64_t step, double lr) {
  if (steps_.empty() || steps_.back().ended) steps_.push_back(Pending{step, lr, {}, 0, 0, std::nullopt});
  steps_.back().unread.push_back({loss.detach().reshape({}), samples});
}

std::optional<std::string> StepLosses::read(double& loss_sum, double& count) {
  std::vector<at::Tensor> losses;
  for (const Pending& pending : steps_) {
    for (const Batch& batch : pending.unread) losses.push_back(batch.loss.to(torch::kDouble));
  }
  if (losses.empty()) return std::nullopt;
  const at::Tensor values = torch::stack(losses).cpu();  // the one synchronisation
  const double* value = values.data_ptr<double>();
  std::optional<std::string> failure;
  for (Pending& pending : steps_) {
    for (const Batch& batch : pending.unread) {
      const double loss = *value++;
      if (!std::isfinite(loss) && !failure) {
        failure = fmt::format("the loss became {} at epoch {} step {}: lower train.lr (now {:g})", loss, epoch_ + 1,
                              pending.step, pending.lr);
      }
      const auto samples = static_cast<double>(batch.samples);
      loss_sum += loss * samples;
      count += samples;
      pending.loss_sum += loss;
      ++pending.batches;
    }
    pending.unread.clear();
  }
  return failure;
}

std::vector<StepLosses::Step> StepLosses::end_step(const StepRecord& record, std::int64_t samples) {
  steps_.back().ended = Step{record, samples};
  std::vector<Step> complete;
  while (!steps_.empty() && steps_.front().ended && steps_.front().unread.empty()) {
    Step step = *steps_.front().ended;
    step.record.train_loss = steps_.front().loss_sum / steps_.front().batches;
    complete.push_back(step);
    steps_.pop_front();
  }
  return complete;
}

void ReadPoints::step_took(double seconds) {
  ++steps_;
  seconds_ += seconds;
}

std::int64_t ReadPoints::propose() const {
  if (steps_ == 0 || !(seconds_ > 0)) return 1;
  const double steps = kSecondsBetween * static_cast<double>(steps_) / seconds_;
  return std::clamp<std::int64_t>(std::llround(std::min(steps, static_cast<double>(kMostSteps))), 1, kMostSteps);
}

void ReadPoints::agreed(std::int64_t step, std::int64_t proposals, int world_size) {
  next_ = step + std::max<std::int64_t>(1, proposals / world_size);
  steps_ = 0;
  seconds_ = 0;
}

}  // namespace tp::train
