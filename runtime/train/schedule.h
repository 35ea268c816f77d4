// Learning-rate schedules over the whole run, as pure functions of the step.
#pragma once

#include <cstdint>
#include <string>

namespace tp::train {

struct ScheduleOptions {
  std::string kind;        // constant | one_cycle | cosine
  double peak_lr = 1e-3;
  double warmup = 0.25;    // fraction of the steps spent warming up
  std::int64_t total_steps = 1;
};

// one_cycle follows fastai's fit_one_cycle: cosine from peak/25 up to peak over the warmup, then
// cosine down to peak/1e5 (div=25, final_div=1e5). cosine: linear warmup from 0, then cosine to 0.
double learning_rate(const ScheduleOptions& options, std::int64_t step);

}  // namespace tp::train
