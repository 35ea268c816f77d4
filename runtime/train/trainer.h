// The training loop: optimizer, schedule, gradient averaging across ranks, validation, metrics,
// checkpoints and the final outputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "spec/spec.h"

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

struct EpochMetrics {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t step = 0;
  double lr = 0;
  double train_loss = 0;
  double valid_loss = 0;      // NaN without validation data
  double valid_accuracy = 0;  // classification only, NaN otherwise
  double seconds = 0;
};

struct FitResult {
  EpochMetrics last;
  std::int64_t epochs_run = 0;  // in this process (fewer than the spec's when resumed)
  std::filesystem::path model_file;
};

// Called on rank 0 with each output file once it is complete (a checkpoint, the metrics after an epoch,
// model.pt, run.json), for example to upload it to an s3:// output.
using PublishFile = std::function<void(const std::filesystem::path& file)>;

// Trains `model` on `data` as `spec` says and writes into `output_dir` (rank 0 only):
// metrics.jsonl (one line per epoch), checkpoints/, and at the very end model.pt (TorchScript) and
// run.json. A failed run never leaves model.pt or run.json behind.
FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const std::filesystem::path& output_dir, const RunOrigin& origin,
              const PublishFile& publish = {});

}  // namespace tp::train
