#include "train/checkpoint.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "epoch-";
constexpr const char* kSuffix = ".ckpt";

// Checkpoint files in `directory`, newest first.
std::vector<fs::path> list_checkpoints(const fs::path& directory) {
  std::vector<fs::path> files;
  if (!fs::is_directory(directory)) return files;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) == 0 && entry.path().extension() == kSuffix) files.push_back(entry.path());
  }
  std::sort(files.rbegin(), files.rend());
  return files;
}

TrainingPosition load_into(const fs::path& file, torch::jit::Module& model, torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive archive;
  // Onto the model's device: the optimizer's state must live where the parameters do.
  archive.load_from(file.string(), (*model.parameters().begin()).device());
  torch::Tensor epochs_done, batches_done, step;
  archive.read("position.epochs_done", epochs_done);
  archive.read("position.batches_done", batches_done);
  archive.read("position.step", step);
  // Read everything before changing anything, so a bad archive leaves the model untouched.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  for (const auto& parameter : model.named_parameters()) {
    torch::Tensor saved;
    archive.read("model." + parameter.name, saved);
    copies.emplace_back(parameter.value, saved);
  }
  for (const auto& buffer : model.named_buffers()) {
    torch::Tensor saved;
    archive.read("buffer." + buffer.name, saved);
    copies.emplace_back(buffer.value, saved);
  }
  torch::serialize::InputArchive optimizer_archive;
  archive.read("optimizer", optimizer_archive);
  torch::NoGradGuard no_grad;
  for (auto& [target, saved] : copies) target.copy_(saved);
  optimizer.load(optimizer_archive);
  return {epochs_done.item<std::int64_t>(), batches_done.item<std::int64_t>(), step.item<std::int64_t>()};
}

}  // namespace

fs::path checkpoint_path(const fs::path& directory, const TrainingPosition& position) {
  if (position.batches_done == 0) return directory / fmt::format("{}{:06d}{}", kPrefix, position.epochs_done, kSuffix);
  return directory /
         fmt::format("{}{:06d}_batch-{:06d}{}", kPrefix, position.epochs_done, position.batches_done, kSuffix);
}

void save_checkpoint(const fs::path& file, const torch::jit::Module& model, const torch::optim::Optimizer& optimizer,
                     const TrainingPosition& position) {
  torch::serialize::OutputArchive archive;
  archive.write("position.epochs_done", torch::tensor(position.epochs_done));
  archive.write("position.batches_done", torch::tensor(position.batches_done));
  archive.write("position.step", torch::tensor(position.step));
  for (const auto& parameter : model.named_parameters()) archive.write("model." + parameter.name, parameter.value);
  for (const auto& buffer : model.named_buffers()) archive.write("buffer." + buffer.name, buffer.value);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);

  // Serialized in memory first: LibTorch's file writer aborts the process when the disk fills (its
  // destructor throws), while write_file_atomic reports it and removes its temporary file.
  std::ostringstream bytes;
  archive.save_to(bytes);
  fs::create_directories(file.parent_path());
  try {
    write_file_atomic(file, bytes.str());
  } catch (const Error& error) {
    const auto previous = list_checkpoints(file.parent_path());
    fail(error.code(), "checkpoint not saved: {}; {}", error.what(),
         previous.empty() ? std::string("no earlier checkpoint exists")
                          : fmt::format("the previous checkpoint {} is intact", previous.front().string()));
  }
}

std::optional<TrainingPosition> load_latest_checkpoint(const fs::path& directory, torch::jit::Module& model,
                                                       torch::optim::Optimizer& optimizer) {
  for (const auto& file : list_checkpoints(directory)) {
    try {
      return load_into(file, model, optimizer);
    } catch (const c10::Error& error) {
      spdlog::warn("skipping checkpoint {}: it does not load ({})", file.string(), error.what_without_backtrace());
    }
  }
  return std::nullopt;
}

std::vector<fs::path> prune_checkpoints(const fs::path& directory, std::int64_t keep) {
  const auto files = list_checkpoints(directory);
  std::vector<fs::path> removed;
  for (std::size_t i = static_cast<std::size_t>(keep); i < files.size(); ++i) {
    fs::remove(files[i]);
    removed.push_back(files[i]);
  }
  return removed;
}

}  // namespace tp::train
