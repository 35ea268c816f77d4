// The training loop: optimizer, schedule, gradient averaging across ranks, validation, metrics,
// checkpoints and the final outputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "spec/spec.h"
#include "train/metrics.h"

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

// Trains `model` on `data` as `spec` says and writes into `output_dir` (rank 0 only):
// steps.jsonl (one line per optimizer step), metrics.jsonl and metrics.csv (one line per epoch),
// report.html (rewritten at each epoch end), checkpoints/, and at the very end model.pt (TorchScript)
// and run.json. A failed run never leaves model.pt or run.json behind.
FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const std::filesystem::path& output_dir, const RunOrigin& origin);

}  // namespace tp::train
