// A run's checkpoints across the ranks: where each rank keeps them, the newest one agreed on by all ranks
// (sent to those that lack it), forgetting an earlier start's, and saving with the time it took. Internal
// to train.
#pragma once

#include <filesystem>
#include <optional>

#include "dist/communicator.h"
#include "spec/spec.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace tp::train {

// Where this rank keeps checkpoints: the run's directory, checkpoints/<run key>/, in its node's output.
struct RunCheckpoints {
  std::filesystem::path directory;
  bool keeps = false;  // rank 0, and a node's own copy (FitEnvironment::node_copy)
};

// Rank 0 names the run; every rank that keeps checkpoints records its identity beside them, and rank 0
// publishes it (an s3:// output: a new pod compares its run with it before any rendezvous). Collective.
RunCheckpoints run_checkpoints_of(const FitEnvironment& environment, const std::filesystem::path& output_dir,
                                  dist::Communicator& communicator);

// checkpoint.resume = "never": this run's checkpoints from an earlier start are deleted, so that the new
// ones are not mixed with them; other runs' are left alone. The `writer` withdraws them from the output.
void forget_checkpoints(const std::filesystem::path& directory, const FitEnvironment& environment, bool writer);

// The newest checkpoint any rank holds (by step), the same on every rank: ranks that lack it receive it
// from the lowest rank that has it, and those that keep checkpoints store it. Nothing when no rank has one.
// Collective.
std::optional<Checkpoint> agree_on_checkpoint(std::optional<Checkpoint> mine, dist::Communicator& communicator,
                                              const RunCheckpoints& checkpoints);

// Saves a checkpoint, logs how long it took (a preempted pod has k8s.grace_s to write one) and returns the
// seconds.
double save_timed(const std::filesystem::path& file, const torch::jit::Module& model,
                  const torch::optim::Optimizer& optimizer, const CheckpointState& state, const spec::Spec& spec,
                  bool writer);

}  // namespace tp::train
