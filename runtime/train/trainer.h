// The training loop: optimizer, schedule, gradient averaging across ranks, validation, metrics,
// checkpoints and the final outputs.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "dist/communicator.h"
#include "spec/spec.h"
#include "storage/run_identity.h"
#include "train/metrics.h"
#include "train/run_record.h"

namespace torch::jit {
struct Module;
}

namespace tp::train {

struct FitResult {
  EpochMetrics last;
  std::int64_t epochs_run = 0;  // in this process (fewer than the spec's when resumed)
  std::filesystem::path model_file;
  // The run had trained its epochs and written its final outputs before: nothing was trained or rewritten.
  bool already_complete = false;
};

// Called on rank 0 with each output file once it is complete (a checkpoint, the metrics after an epoch,
// model.pt, run.json), for example to upload it to an s3:// output.
using PublishFile = std::function<void(const std::filesystem::path& file)>;
// Called on rank 0 with each published file deleted since (a checkpoint beyond checkpoint.keep), for
// example to delete it from an s3:// output too.
using WithdrawFile = std::function<void(const std::filesystem::path& file)>;

// What training needs beyond the spec: where this rank computes, where it keeps checkpoints, and what to
// do with finished files.
struct FitEnvironment {
  c10::Device device = c10::kCPU;  // cuda:<local rank> on a GPU node
  int local_rank = 0;              // local rank 0 of each node serves /metrics (job.metrics_port)
  PublishFile publish;             // may be empty
  WithdrawFile withdraw;           // may be empty
  // This node's checkpoints (empty: <output_dir>/checkpoints). Each run keeps its own in a subdirectory
  // named by its identity (storage/run_identity.h), directly here when there is no identity.
  std::filesystem::path checkpoints_root;
  // Rank 0: the run's identity; the other ranks receive it from rank 0.
  std::optional<storage::RunIdentity> identity;
  // A rank other than 0 keeps its own copy of each checkpoint: local rank 0 of another node, when the
  // output is on each node's own disk. A restart then resumes even when rank 0's node lost its disk.
  bool node_copy = false;
  // Rank 0: model.pt and run.json of an earlier start are there, so a run found complete is not redone.
  bool final_outputs_present = false;
};

// Trains `model` on `data` as `spec` says and writes into `output_dir` (rank 0 only):
// steps.jsonl (one line per optimizer step), metrics.jsonl and metrics.csv (one line per epoch),
// report.html (rewritten at each epoch end), checkpoints/, and at the very end model.pt (TorchScript)
// and run.json. A failed run never leaves model.pt or run.json behind.
// With checkpoint.resume = "auto" it resumes from the newest checkpoint of its run that any rank holds
// (ranks lacking it receive it), at any world size: an interrupted epoch trains its remaining samples once.
// SIGTERM or SIGINT on any rank: all ranks stop at the same step, one checkpoint is written, and every
// rank throws tp::Error(interrupted).
FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const std::filesystem::path& output_dir, const RunOrigin& origin,
              const FitEnvironment& environment = {});

}  // namespace tp::train
