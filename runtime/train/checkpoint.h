// Checkpoints: model parameters and buffers, optimizer state and the training position, written
// atomically (temporary file, then rename) so a crash never leaves a checkpoint that looks valid
// but is not. The archive is a zip with a CRC per record: a truncated or corrupted file fails to load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace torch::jit {
struct Module;
}
namespace torch::optim {
class Optimizer;
}

namespace tp::train {

struct TrainingPosition {
  std::int64_t epochs_done = 0;    // complete epochs
  std::int64_t batches_done = 0;   // batches of the next epoch already trained (a mid-epoch checkpoint)
  std::int64_t step = 0;           // optimizer steps taken
};

// epoch-NNNNNN.ckpt after whole epochs; epoch-NNNNNN_batch-NNNNNN.ckpt mid-epoch. Names sort in
// training order.
std::filesystem::path checkpoint_path(const std::filesystem::path& directory, const TrainingPosition& position);

void save_checkpoint(const std::filesystem::path& file, const torch::jit::Module& model,
                     const torch::optim::Optimizer& optimizer, const TrainingPosition& position);

// Loads the newest checkpoint in `directory` that loads cleanly into `model` and `optimizer`,
// skipping (with a warning) any that are corrupted. Nothing when there is none.
std::optional<TrainingPosition> load_latest_checkpoint(const std::filesystem::path& directory,
                                                       torch::jit::Module& model, torch::optim::Optimizer& optimizer);

// Deletes all but the newest `keep` checkpoints.
std::vector<std::filesystem::path> prune_checkpoints(const std::filesystem::path& directory,
                                                     std::int64_t keep);

}  // namespace tp::train
