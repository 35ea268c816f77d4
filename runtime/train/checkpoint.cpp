#include "train/checkpoint.h"

#include <ATen/core/Generator.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
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

c10::Device device_of(const torch::jit::Module& model) { return (*model.parameters().begin()).device(); }

std::string bytes_of(torch::serialize::OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&bytes](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  return bytes;
}

std::int64_t read_integer(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor value;
  archive.read(key, value);
  return value.item<std::int64_t>();
}

// An epoch's layouts as rows of (from_sample, world_size, ranks_per_node).
torch::Tensor layouts_tensor(const std::vector<data::RankLayout>& layouts) {
  std::vector<std::int64_t> values;
  for (const data::RankLayout& layout : layouts) {
    values.insert(values.end(), {static_cast<std::int64_t>(layout.from_sample), layout.world_size, layout.ranks_per_node});
  }
  return torch::tensor(values, torch::kLong).reshape({static_cast<std::int64_t>(layouts.size()), 3});
}

std::vector<data::RankLayout> layouts_of(const torch::Tensor& rows) {
  if (rows.dim() != 2 || rows.size(1) != 3) fail(ExitCode::output, "position.layouts is not rows of 3 numbers");
  std::vector<data::RankLayout> layouts;
  const torch::Tensor values = rows.to(torch::kLong).contiguous();
  for (std::int64_t row = 0; row < values.size(0); ++row) {
    layouts.push_back({static_cast<std::size_t>(values[row][0].item<std::int64_t>()),
                       static_cast<int>(values[row][1].item<std::int64_t>()),
                       static_cast<int>(values[row][2].item<std::int64_t>())});
  }
  return layouts;
}

double read_number(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor value;
  archive.read(key, value);
  return value.item<double>();
}

}  // namespace

fs::path checkpoint_path(const fs::path& directory, const TrainingPosition& position) {
  if (position.samples_done == 0) return directory / fmt::format("{}{:06d}{}", kPrefix, position.epochs_done, kSuffix);
  return directory /
         fmt::format("{}{:06d}_sample-{:09d}{}", kPrefix, position.epochs_done, position.samples_done, kSuffix);
}

std::string checkpoint_bytes(const torch::jit::Module& model, const torch::optim::Optimizer& optimizer,
                             const CheckpointState& state) {
  torch::serialize::OutputArchive archive;
  archive.write("position.epochs_done", torch::tensor(state.position.epochs_done));
  archive.write("position.samples_done", torch::tensor(state.position.samples_done));
  archive.write("position.step", torch::tensor(state.position.step));
  if (!state.position.layouts.empty()) archive.write("position.layouts", layouts_tensor(state.position.layouts));
  archive.write("state.world_size", torch::tensor(state.world_size));
  archive.write("state.train_loss_sum", torch::tensor(state.train_loss_sum, torch::kDouble));
  archive.write("state.train_count", torch::tensor(state.train_count, torch::kDouble));
  for (const auto& parameter : model.named_parameters()) archive.write("model." + parameter.name, parameter.value);
  for (const auto& buffer : model.named_buffers()) archive.write("buffer." + buffer.name, buffer.value);
  torch::serialize::OutputArchive optimizer_archive;
  optimizer.save(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    archive.write("rng.cpu", generator.get_state());
  }
  // Serialized in memory: the archive holds the tensors themselves, which the next step changes in place.
  return bytes_of(archive);
}

void write_checkpoint(const fs::path& file, const std::string& bytes) {
  // Not LibTorch's file writer: it aborts the process when the disk fills (its destructor throws), while
  // write_file_atomic reports it and removes its temporary file.
  fs::create_directories(file.parent_path());
  try {
    write_file_atomic(file, bytes);
  } catch (const Error& error) {
    const auto previous = list_checkpoints(file.parent_path());
    rethrow_as(error.code(), "checkpoint not saved ({})",
               previous.empty()
                   ? std::string("no earlier checkpoint exists")
                   : fmt::format("the previous checkpoint {} is intact", previous.front().string()));
  }
}

void save_checkpoint(const fs::path& file, const torch::jit::Module& model, const torch::optim::Optimizer& optimizer,
                     const CheckpointState& state) {
  write_checkpoint(file, checkpoint_bytes(model, optimizer, state));
}

Checkpoint read_checkpoint(std::string bytes, const fs::path& file) {
  Checkpoint checkpoint{file, std::move(bytes), {}};
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(checkpoint.bytes.data(), checkpoint.bytes.size(), c10::Device(c10::kCPU));
    CheckpointState& state = checkpoint.state;
    state.position.epochs_done = read_integer(archive, "position.epochs_done");
    state.position.samples_done = read_integer(archive, "position.samples_done");
    state.position.step = read_integer(archive, "position.step");
    torch::Tensor layouts;
    if (archive.try_read("position.layouts", layouts)) state.position.layouts = layouts_of(layouts);
    state.world_size = read_integer(archive, "state.world_size");
    state.train_loss_sum = read_number(archive, "state.train_loss_sum");
    state.train_count = read_number(archive, "state.train_count");
  } catch (const c10::Error& error) {
    fail(ExitCode::output, "checkpoint {} is not readable: {}", file.string(), error.what_without_backtrace());
  }
  return checkpoint;
}

std::optional<Checkpoint> newest_checkpoint(const fs::path& directory) {
  for (const auto& file : list_checkpoints(directory)) {
    try {
      return read_checkpoint(read_file(file, ExitCode::output), file);
    } catch (const Error& error) {
      spdlog::warn("skipping checkpoint {}: {}", file.string(), error.what());
    }
  }
  return std::nullopt;
}

void apply_checkpoint(const Checkpoint& checkpoint, torch::jit::Module& model, torch::optim::Optimizer& optimizer) {
  const std::string name = checkpoint.file.string();
  const c10::Device device = device_of(model);  // the optimizer's state must live where the parameters do
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(checkpoint.bytes.data(), checkpoint.bytes.size(), device);
    // Every tensor is read and checked against the model before anything changes.
    std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
    const auto take = [&](const std::string& key, const torch::Tensor& target) {
      torch::Tensor saved;
      archive.read(key, saved);
      if (saved.sizes() != target.sizes()) {
        fail(ExitCode::model, "checkpoint {}: {} has shape {}, the model's has {}", name, key,
             c10::str(saved.sizes()), c10::str(target.sizes()));
      }
      copies.emplace_back(target, saved);
    };
    for (const auto& parameter : model.named_parameters()) take("model." + parameter.name, parameter.value);
    for (const auto& buffer : model.named_buffers()) take("buffer." + buffer.name, buffer.value);
    torch::serialize::InputArchive optimizer_archive;
    archive.read("optimizer", optimizer_archive);
    torch::Tensor generator_state;
    const bool has_generator_state = archive.try_read("rng.cpu", generator_state);

    // The optimizer is loaded first, from a copy of its own state that undoes a load failing halfway.
    torch::serialize::OutputArchive own;
    optimizer.save(own);
    const std::string own_bytes = bytes_of(own);
    try {
      optimizer.load(optimizer_archive);
    } catch (const c10::Error& error) {
      optimizer.state().clear();
      torch::serialize::InputArchive restore;
      restore.load_from(own_bytes.data(), own_bytes.size(), device);
      optimizer.load(restore);
      fail(ExitCode::model, "checkpoint {}: the optimizer state does not load ({}); the model and the optimizer "
           "are left as they were", name, error.what_without_backtrace());
    }
    torch::NoGradGuard no_grad;
    for (auto& [target, saved] : copies) target.copy_(saved);
    if (has_generator_state) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(generator_state.cpu());
    }
  } catch (const c10::Error& error) {
    fail(ExitCode::model, "checkpoint {} does not load: {}", name, error.what_without_backtrace());
  }
}

std::vector<fs::path> prune_checkpoints(const fs::path& directory, std::int64_t keep) {
  const auto files = list_checkpoints(directory);
  std::vector<fs::path> removed;
  for (std::size_t i = static_cast<std::size_t>(keep); i < files.size(); ++i) {
    std::error_code error;  // another process keeping a copy in the same directory may have removed it
    fs::remove(files[i], error);
    removed.push_back(files[i]);
  }
  return removed;
}

}  // namespace tp::train
