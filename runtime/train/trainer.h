// The training loop: optimizer, schedule, gradient averaging across ranks, validation, metrics,
// checkpoints and the final outputs.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "spec/spec.h"
#include "train/metrics.h"
#include "train/report.h"

namespace torch::jit {
struct Module;
}

namespace tp::train {

// What the run record says about where the job came from.
struct RunOrigin {
  std::string repo;
  std::string ref;
  std::string commit;
  std::string spec_name;
  std::string resolved_spec;  // spec::describe() of the spec used
};

struct FitResult {
  EpochMetrics last;
  std::int64_t epochs_run = 0;  // in this process (fewer than the spec's when resumed)
  std::filesystem::path model_file;
};

// Called on rank 0 with each output file once it is complete (a checkpoint, the metrics after an epoch,
// model.pt, run.json), for example to upload it to an s3:// output.
using PublishFile = std::function<void(const std::filesystem::path& file)>;
// Called on rank 0 with each published file deleted since (a checkpoint beyond checkpoint.keep), for
// example to delete it from an s3:// output too.
using WithdrawFile = std::function<void(const std::filesystem::path& file)>;

// What training needs beyond the spec: where this rank computes, and what to do with finished files.
struct FitEnvironment {
  c10::Device device = c10::kCPU;  // cuda:<local rank> on a GPU node
  PublishFile publish;             // may be empty
  WithdrawFile withdraw;           // may be empty
};

// Trains `model` on `data` as `spec` says and writes into `output_dir` (rank 0 only):
// steps.jsonl (one line per optimizer step), metrics.jsonl and metrics.csv (one line per epoch),
// report.html (rewritten at each epoch end), checkpoints/, and at the very end model.pt (TorchScript)
// and run.json. A failed run never leaves model.pt or run.json behind.
FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const std::filesystem::path& output_dir, const RunOrigin& origin,
              const FitEnvironment& environment = {});

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
