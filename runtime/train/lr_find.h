// The learning-rate range test (train.lr_find = true): a short run with the lr growing exponentially, and
// the lr it suggests for train.lr (docs/training.md).
#pragma once

#include <filesystem>
#include <vector>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "spec/spec.h"
#include "train/metrics.h"
#include "train/trainer.h"

namespace torch::jit {
struct Module;
}

namespace tp::train {

struct LrFindResult {
  std::vector<LrFindPoint> points;
  double suggested_lr = 0;  // a tenth of the lr with the lowest smoothed loss (fastai's lr_min)
  double steepest_lr = 0;   // where the smoothed loss falls fastest against log(lr) (fastai's lr_steep)
};

// fastai's Learner.lr_find: one batch per step with the lr growing exponentially from 1e-7 to 10 over
// up to 100 steps, stopping when the smoothed loss (exponential moving average, beta 0.98, debiased)
// passes 4x its minimum or stops being finite. The loss of a step is the mean over ranks, so every
// rank stops at the same step. With train.freeze_epochs the body is frozen, as before fine_tune.
// Rank 0 writes lr_find.jsonl and lr_find.html into `output_dir`. The model's weights are changed.
LrFindResult find_learning_rate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                                dist::Communicator& communicator, const std::filesystem::path& output_dir,
                                const FitEnvironment& environment = {});

}  // namespace tp::train
