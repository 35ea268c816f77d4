// Learning-rate schedules over the whole run, as pure functions of how far training is.
#pragma once

#include <cstdint>

#include "spec/spec.h"

namespace tp::train {

struct ScheduleOptions {
  spec::Schedule kind;
  double peak_lr = 1e-3;
  double warmup = 0.25;    // fraction of the schedule spent warming up
  double length = 1;       // the schedule's length, in the unit of `position` below
  double per_epoch = 1;    // step: that unit's count in one epoch
  std::int64_t step_every = 30;  // step: epochs between two decays
  double step_gamma = 0.1;       // step: the factor of each decay
};

// one_cycle follows fastai's fit_one_cycle: cosine from peak/25 up to peak over the warmup, then
// cosine down to peak/1e5 (div=25, final_div=1e5). cosine: linear warmup from 0, then cosine to 0.
// step: peak x gamma^floor(epoch / step_every), PyTorch's StepLR stepped once per epoch, without warmup.
// `position` is how far training is, in the unit `length` is given in. The trainer counts epochs by the
// samples trained (2.5: halfway through the third epoch), so a restart at another world size, which takes
// other steps, continues the same schedule.
double learning_rate(const ScheduleOptions& options, double position);

}  // namespace tp::train
