// Learning-rate schedules over the whole run, as pure functions of the step.
#pragma once

#include <cstdint>
#include <string>

namespace tp::train {

struct ScheduleOptions {
  std::string kind;        // constant | one_cycle | cosine | step
  double peak_lr = 1e-3;
  double warmup = 0.25;    // fraction of the steps spent warming up
  std::int64_t total_steps = 1;
  std::int64_t steps_per_epoch = 1;  // step: epochs are counted in steps
  std::int64_t step_every = 30;      // step: epochs between two decays
  double step_gamma = 0.1;           // step: the factor of each decay
};

// one_cycle follows fastai's fit_one_cycle: cosine from peak/25 up to peak over the warmup, then
// cosine down to peak/1e5 (div=25, final_div=1e5). cosine: linear warmup from 0, then cosine to 0.
// step: peak x gamma^floor(epoch / step_every), PyTorch's StepLR stepped once per epoch, without warmup.
double learning_rate(const ScheduleOptions& options, std::int64_t step);

}  // namespace tp::train
