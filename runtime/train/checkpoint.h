// Checkpoints: model parameters and buffers, optimizer state, the training position and the random
// generator, written atomically (temporary file, then rename) so a crash never leaves a checkpoint that
// looks valid but is not. The archive is a zip with a CRC per record: a truncated or corrupted file fails
// to read. Each run keeps its checkpoints in a directory of its own (storage/run_identity.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/sampler.h"

namespace torch::jit {
struct Module;
}
namespace torch::optim {
class Optimizer;
}

namespace tp::train {

struct TrainingPosition {
  std::int64_t epochs_done = 0;   // complete epochs
  // Samples of the next epoch's global order already trained (a mid-epoch checkpoint). The order does not
  // depend on the world size (data/sampler.h), so a restart at another world size trains the rest.
  std::int64_t samples_done = 0;
  std::int64_t step = 0;  // optimizer steps taken
  // How the ranks stood in nodes while the interrupted epoch ran, which decides its order of packed shards
  // (data/sampler.h): empty when no epoch is under way, or in a checkpoint from before layouts were kept.
  std::vector<data::RankLayout> layouts;
};

// What a checkpoint holds besides the model and the optimizer.
struct CheckpointState {
  TrainingPosition position;
  std::int64_t world_size = 1;  // when it was written
  // The interrupted epoch's running totals over all ranks (mid-epoch checkpoints), so that its
  // train_loss covers the batches before the stop too.
  double train_loss_sum = 0;
  double train_count = 0;
};

// epoch-NNNNNN.ckpt after whole epochs; epoch-NNNNNN_sample-NNNNNNNNN.ckpt mid-epoch. Names sort in
// training order.
std::filesystem::path checkpoint_path(const std::filesystem::path& directory, const TrainingPosition& position);

// A checkpoint's bytes, with the CPU random generator's state (dropout in a TorchScript model goes on as it
// would have): a copy of the state as of now, which write_checkpoint can write while training goes on
// (train/checkpoint_writer.h).
std::string checkpoint_bytes(const torch::jit::Module& model, const torch::optim::Optimizer& optimizer,
                             const CheckpointState& state);
// Writes checkpoint_bytes' `bytes` to `file` atomically. Throws tp::Error (output or storage) naming the intact
// previous checkpoint.
void write_checkpoint(const std::filesystem::path& file, const std::string& bytes);
// Both, now.
void save_checkpoint(const std::filesystem::path& file, const torch::jit::Module& model,
                     const torch::optim::Optimizer& optimizer, const CheckpointState& state);

// A checkpoint read into memory and checked, not applied yet: it can be sent to ranks that lack it.
struct Checkpoint {
  std::filesystem::path file;  // where it was read, for messages
  std::string bytes;
  CheckpointState state;
};

// Reads and checks `bytes` (the whole archive). Throws tp::Error(output) naming `file` when they are not a
// readable checkpoint.
Checkpoint read_checkpoint(std::string bytes, const std::filesystem::path& file);

// The newest checkpoint in `directory` that reads cleanly, skipping (with a warning) corrupted ones.
// Nothing when there is none.
std::optional<Checkpoint> newest_checkpoint(const std::filesystem::path& directory);

// Loads `checkpoint` into `model` and `optimizer`, all or nothing: when any part does not fit (another
// architecture, another optimizer), throws tp::Error(model) and both are exactly as they were.
void apply_checkpoint(const Checkpoint& checkpoint, torch::jit::Module& model, torch::optim::Optimizer& optimizer);

// Deletes all but the newest `keep` checkpoints in `directory` (one run's).
std::vector<std::filesystem::path> prune_checkpoints(const std::filesystem::path& directory, std::int64_t keep);

}  // namespace tp::train
