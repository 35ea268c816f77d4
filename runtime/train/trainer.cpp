#include "train/trainer.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signals.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dist/gradient_sync.h"
#include "train/checkpoint.h"
#include "train/schedule.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const spec::TrainSpec& spec,
                                                        const std::vector<torch::Tensor>& parameters) {
  if (spec.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        parameters, torch::optim::SGDOptions(spec.lr).momentum(spec.momentum).weight_decay(spec.weight_decay));
  }
  if (spec.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(
        parameters,
        torch::optim::AdamOptions(spec.lr).betas({spec.momentum, 0.999}).weight_decay(spec.weight_decay));
  }
  return std::make_unique<torch::optim::AdamW>(
      parameters, torch::optim::AdamWOptions(spec.lr).betas({spec.momentum, 0.999}).weight_decay(spec.weight_decay));
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

torch::Tensor loss_of(const torch::Tensor& output, const torch::Tensor& target, const data::Schema& schema,
                      double label_smoothing = 0.0) {
  if (schema.multi_label) return torch::binary_cross_entropy_with_logits(output, target.to(torch::kFloat));
  if (schema.classification) {
    return torch::nn::functional::cross_entropy(
        output, target, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
  }
  return torch::mse_loss(output.reshape({-1}), target.to(torch::kFloat));
}

// Whether any rank was asked to stop (SIGTERM): all ranks must stop at the same step.
bool stop_agreed(dist::Communicator& communicator) {
  if (communicator.world_size() == 1) return stop_requested();
  std::vector<torch::Tensor> flag{torch::tensor({stop_requested() ? 1L : 0L})};
  communicator.all_reduce_sum(flag);
  return flag[0].item<std::int64_t>() > 0;
}

// Correct predictions in a batch: whole samples for classification, the mean of the per-label
// decisions of each sample for multi-label.
double correct_in(const torch::Tensor& output, const torch::Tensor& target, const data::Schema& schema) {
  if (schema.multi_label) return output.gt(0).eq(target.gt(0.5)).to(torch::kDouble).mean(1).sum().item<double>();
  return output.argmax(1).eq(target).sum().item<double>();
}

// The next batch, with the phase published while it loads.
std::optional<data::Batch> next_batch(data::Loader& loader, dist::Communicator& communicator, std::int64_t step) {
  communicator.set_progress(step, dist::Phase::data);
  return loader.next();
}

struct Totals {
  double loss_sum = 0;
  double correct = 0;
  double count = 0;
};

// Sums per-rank totals over all ranks.
Totals all_ranks(const Totals& mine, dist::Communicator& communicator) {
  std::vector<torch::Tensor> values{torch::tensor({mine.loss_sum, mine.correct, mine.count}, torch::kDouble)};
  communicator.all_reduce_sum(values);
  return {values[0][0].item<double>(), values[0][1].item<double>(), values[0][2].item<double>()};
}

// The fewest samples any rank holds, for data that is already one share per rank.
std::size_t smallest_share(const data::DistributedSampler& sampler, dist::Communicator& communicator) {
  std::vector<torch::Tensor> counts{torch::zeros({communicator.world_size()}, torch::kLong)};
  counts[0][communicator.rank()] = static_cast<std::int64_t>(sampler.samples_per_rank());
  communicator.all_reduce_sum(counts);
  return static_cast<std::size_t>(counts[0].min().item<std::int64_t>());
}

// Validation on this rank's disjoint share (no padding, so every sample counts once overall).
Totals validate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                dist::Communicator& communicator) {
  const std::size_t first = data.rank_share ? 0 : static_cast<std::size_t>(communicator.rank());
  const std::size_t stride = data.rank_share ? 1 : static_cast<std::size_t>(communicator.world_size());
  Totals totals;
  std::vector<std::size_t> mine;
  for (std::size_t i = first; i < data.valid->size(); i += stride) mine.push_back(i);
  torch::NoGradGuard no_grad;
  model.eval();
  data::Loader loader(data.valid, mine, 0,
                      {spec.train.batch_size, static_cast<int>(spec.data.workers)});
  while (auto batch = loader.next()) {
    const torch::Tensor output = model.forward({batch->inputs}).toTensor();
    const double n = static_cast<double>(batch->targets.size(0));
    totals.loss_sum += loss_of(output, batch->targets, data.schema).item<double>() * n;
    if (data.schema.classification) totals.correct += correct_in(output, batch->targets, data.schema);
    totals.count += n;
  }
  model.train();
  return all_ranks(totals, communicator);
}

// metrics.jsonl (one JSON object per line) and metrics.csv, flushed after each epoch so that they
// can be read while training runs.
class MetricsLog {
 public:
  explicit MetricsLog(const fs::path& output_dir) {
    const fs::path csv_file = output_dir / "metrics.csv";
    const bool new_csv = !fs::exists(csv_file);
    json_.open(output_dir / "metrics.jsonl", std::ios::app);
    csv_.open(csv_file, std::ios::app);
    if (!json_ || !csv_) fail(ExitCode::output, "cannot write metrics in {}", output_dir.string());
    if (new_csv) csv_ << "epoch,step,lr,train_loss,valid_loss,accuracy,seconds\n";
  }
  void write(const EpochMetrics& m) {
    auto number = [](double value) { return std::isnan(value) ? nlohmann::json(nullptr) : nlohmann::json(value); };
    auto cell = [](double value) { return std::isnan(value) ? std::string() : fmt::format("{}", value); };
    nlohmann::json line = {{"epoch", m.epoch},
                           {"step", m.step},
                           {"lr", m.lr},
                           {"train_loss", number(m.train_loss)},
                           {"valid_loss", number(m.valid_loss)},
                           {"accuracy", number(m.valid_accuracy)},
                           {"seconds", m.seconds}};
    json_ << line.dump() << '\n';
    json_.flush();
    csv_ << fmt::format("{},{},{},{},{},{},{}\n", m.epoch, m.step, m.lr, cell(m.train_loss), cell(m.valid_loss),
                        cell(m.valid_accuracy), m.seconds);
    csv_.flush();
  }

 private:
  std::ofstream json_;
  std::ofstream csv_;
};

void write_final_outputs(torch::jit::Module& model, const fs::path& output_dir, const RunOrigin& origin,
                         const spec::Spec& spec, const EpochMetrics& last, int world_size, double seconds,
                         const data::Datasets& data) {
  const fs::path model_file = output_dir / "model.pt";
  const fs::path temporary = temporary_sibling(model_file);
  model.eval();
  model.save(temporary.string());
  commit_file(temporary, model_file);

  nlohmann::json record = {
      {"job", spec.job.name},
      {"source", {{"repo", origin.repo}, {"ref", origin.ref}, {"commit", origin.commit}, {"spec", origin.spec_name}}},
      {"resolved_spec", origin.resolved_spec},
      {"world_size", world_size},
      {"data", {{"train_samples", data.train->size()}, {"valid_samples", data.valid ? data.valid->size() : 0},
                {"classes", data.schema.class_names}}},
      {"final", {{"epoch", last.epoch}, {"train_loss", last.train_loss},
                 {"valid_loss", std::isnan(last.valid_loss) ? nlohmann::json(nullptr) : nlohmann::json(last.valid_loss)},
                 {"accuracy", std::isnan(last.valid_accuracy) ? nlohmann::json(nullptr)
                                                              : nlohmann::json(last.valid_accuracy)}}},
      {"seconds", seconds},
      {"versions", {{"trainpoint", TRAINPOINT_VERSION_STRING}, {"libtorch", TORCH_VERSION}}},
  };
  write_file_atomic(output_dir / "run.json", record.dump(2) + "\n");
}

}  // namespace

FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const fs::path& output_dir, const RunOrigin& origin) {
  const auto started = Clock::now();
  const bool writer = communicator.rank() == 0;
  const fs::path checkpoints = output_dir / "checkpoints";
  // The final outputs of an earlier run go first: only a run that finishes writes them again.
  if (writer) {
    fs::create_directories(output_dir);
    fs::remove(output_dir / "run.json");
    fs::remove(output_dir / "model.pt");
  }

  std::vector<torch::Tensor> parameters;
  std::vector<std::string> names;
  for (const auto& parameter : model.named_parameters()) {
    parameter.value.set_requires_grad(true);
    parameters.push_back(parameter.value);
    names.push_back(parameter.name);
  }
  if (parameters.empty()) fail(ExitCode::model, "the model has no parameters to train");
  auto optimizer = make_optimizer(spec.train, parameters);
  model.train();

  TrainingPosition position;
  if (spec.checkpoint.resume == "auto") {
    if (auto resumed = load_latest_checkpoint(checkpoints, model, *optimizer)) {
      position = *resumed;
      spdlog::info("resumed from checkpoint after epoch {}{} (step {})", position.epochs_done,
                   position.batches_done > 0 ? fmt::format(" and {} batches", position.batches_done) : "",
                   position.step);
    }
  }
  // Every rank reads the checkpoints (the output directory is shared by the ranks of a node, or
  // staged from object storage); all must have resumed from the same place.
  if (communicator.world_size() > 1) {
    std::vector<torch::Tensor> agreed{
        torch::tensor({position.epochs_done, position.batches_done, position.step}, torch::kLong)};
    communicator.broadcast(agreed, 0);
    if (agreed[0][0].item<std::int64_t>() != position.epochs_done ||
        agreed[0][1].item<std::int64_t>() != position.batches_done ||
        agreed[0][2].item<std::int64_t>() != position.step) {
      fail(ExitCode::output,
           "rank {} resumed at step {} but rank 0 at step {}: the ranks do not see the same checkpoints in {}",
           communicator.rank(), position.step, agreed[0][2].item<std::int64_t>(), checkpoints.string());
    }
  }

  // Every rank starts from rank 0's weights and buffers (after rank 0 resumed). Buffers such as
  // BatchNorm's running statistics are not averaged afterwards: each rank keeps its own, and the
  // saved model has rank 0's, as PyTorch's DDP does with broadcast_buffers at the start.
  {
    torch::NoGradGuard no_grad;
    communicator.broadcast(parameters, 0);
    std::vector<torch::Tensor> buffers;
    for (const auto& buffer : model.buffers()) buffers.push_back(buffer);
    if (!buffers.empty()) communicator.broadcast(buffers, 0);
  }
  std::optional<dist::GradientSynchronizer> synchronizer;
  if (communicator.world_size() > 1) {
    synchronizer.emplace(parameters, names, communicator,
                         dist::BucketOptions{1 << 20, static_cast<std::size_t>(spec.dist.bucket_mb) << 20,
                                             spec.dist.allow_unused_parameters});
  }

  // A rank's own share (sharded staging) is shuffled locally; the whole dataset is split across ranks.
  const bool split_here = !data.rank_share;
  data::DistributedSampler sampler({data.train->size(), split_here ? communicator.rank() : 0,
                                    split_here ? communicator.world_size() : 1, true, spec.data.drop_last,
                                    static_cast<std::uint64_t>(spec.job.seed)});
  // Every rank must take the same number of steps, or one would wait forever in a collective.
  const std::size_t samples_per_rank = split_here ? sampler.samples_per_rank() : smallest_share(sampler, communicator);
  const auto batch_size = static_cast<std::size_t>(spec.train.batch_size);
  const std::int64_t batches_per_epoch = static_cast<std::int64_t>((samples_per_rank + batch_size - 1) / batch_size);
  const std::int64_t accumulate = spec.train.accumulate;
  const std::int64_t steps_per_epoch = (batches_per_epoch + accumulate - 1) / accumulate;
  // The linear scaling rule (Goyal et al. 2017): the peak lr grows with the global batch, with warmup.
  const double global_batch_factor = static_cast<double>(communicator.world_size() * accumulate);
  const double peak_lr = spec.train.lr_scaling == "linear" ? spec.train.lr * global_batch_factor : spec.train.lr;
  const ScheduleOptions schedule{spec.train.schedule, peak_lr, spec.train.warmup, steps_per_epoch * spec.train.epochs};
  if (writer) {
    spdlog::info("training {} samples ({} per rank, {} steps per epoch), validating on {}; world size {}; global "
                 "batch {}; peak lr {:g}{}",
                 data.train->size(), samples_per_rank, steps_per_epoch, data.valid ? data.valid->size() : 0,
                 communicator.world_size(), spec.train.batch_size * communicator.world_size() * accumulate, peak_lr,
                 spec.train.lr_scaling == "linear" ? fmt::format(" (train.lr {:g} x {:g}, linear scaling)", spec.train.lr,
                                                                 global_batch_factor)
                                                   : "");
  }

  std::unique_ptr<MetricsLog> metrics;
  if (writer) metrics = std::make_unique<MetricsLog>(output_dir);
  install_stop_handlers();

  FitResult result;
  for (std::int64_t epoch = position.epochs_done; epoch < spec.train.epochs; ++epoch) {
    const auto epoch_started = Clock::now();
    std::vector<std::size_t> indices = sampler.indices(epoch);
    indices.resize(std::min(indices.size(), samples_per_rank));
    data::LoaderOptions loader_options;
    loader_options.batch_size = spec.train.batch_size;
    loader_options.workers = static_cast<int>(spec.data.workers);
    loader_options.first_batch = static_cast<std::size_t>(position.batches_done);
    data::Loader loader(data.train, std::move(indices), epoch, loader_options);
    // Rank 0 speaks for the job; the other ranks log only warnings and errors.
    std::optional<log::Progress> progress;
    if (writer) {
      progress.emplace(fmt::format("epoch {}/{}", epoch + 1, spec.train.epochs), loader.num_batches(), "batches");
      progress->advance(loader.position());
    }
    Totals train_totals;
    double lr = peak_lr;
    try {
      while (auto batch = next_batch(loader, communicator, position.step)) {
        // With accumulation, gradients are summed locally over `accumulate` batches and averaged
        // across ranks only on the last one (DDP's no_sync).
        const std::int64_t micro = (static_cast<std::int64_t>(loader.position()) - 1) % accumulate;
        const bool stepping = micro == accumulate - 1 || loader.position() == loader.num_batches();
        if (micro == 0) {
          lr = learning_rate(schedule, position.step);
          set_learning_rate(*optimizer, lr);
          optimizer->zero_grad();
        }
        communicator.set_progress(position.step, dist::Phase::forward);
        const torch::Tensor output = model.forward({batch->inputs}).toTensor();
        const torch::Tensor loss = loss_of(output, batch->targets, data.schema, spec.train.label_smoothing);
        const double loss_value = loss.item<double>();
        if (!std::isfinite(loss_value)) {
          fail(ExitCode::training, "the loss became {} at epoch {} step {}: lower train.lr (now {:g})", loss_value,
               epoch + 1, position.step, lr);
        }
        if (synchronizer) synchronizer->set_enabled(stepping);
        communicator.set_progress(position.step, dist::Phase::backward);
        (accumulate > 1 ? loss / static_cast<double>(accumulate) : loss).backward();
        const double n = static_cast<double>(batch->targets.size(0));
        train_totals.loss_sum += loss_value * n;
        train_totals.count += n;
        if (progress) {
          progress->set_note(fmt::format("loss {:.4f}", train_totals.loss_sum / train_totals.count));
          progress->advance();
        }
        if (!stepping) continue;
        if (synchronizer) synchronizer->finish();
        // Clipping after the all-reduce, so every rank clips the same averaged gradients.
        if (spec.train.clip_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, spec.train.clip_norm);
        optimizer->step();
        ++position.step;
        if (stop_agreed(communicator)) {
          position.batches_done = static_cast<std::int64_t>(loader.position());
          const fs::path saved = checkpoint_path(checkpoints, position);
          communicator.set_progress(position.step, dist::Phase::checkpoint);
          if (writer) save_checkpoint(saved, model, *optimizer, position);
          communicator.barrier();
          fail(ExitCode::interrupted, "stopped by a signal at epoch {} batch {} (step {}); checkpoint {} saved: a "
               "restart resumes there", epoch + 1, position.batches_done, position.step, saved.string());
        }
      }
    } catch (const c10::Error& error) {
      fail(ExitCode::training, "epoch {}: {}", epoch + 1, error.what_without_backtrace());
    }
    if (progress) progress->finish();
    position.epochs_done = epoch + 1;
    position.batches_done = 0;

    const Totals train = all_ranks(train_totals, communicator);
    EpochMetrics m;
    m.epoch = epoch + 1;
    m.step = position.step;
    m.lr = lr;
    m.train_loss = train.count > 0 ? train.loss_sum / train.count : std::nan("");
    m.valid_loss = m.valid_accuracy = std::nan("");
    if (data.valid && data.valid->size() > 0) {
      communicator.set_progress(position.step, dist::Phase::validate);
      const Totals valid = validate(model, data, spec, communicator);
      m.valid_loss = valid.loss_sum / valid.count;
      if (data.schema.classification) m.valid_accuracy = valid.correct / valid.count;
    }
    m.seconds = std::chrono::duration<double>(Clock::now() - epoch_started).count();
    if (writer) {
      spdlog::info("epoch {}/{}: train_loss {:.4f} valid_loss {:.4f} accuracy {:.4f} lr {:.3g} ({:.1f}s)", m.epoch,
                   spec.train.epochs, m.train_loss, m.valid_loss, m.valid_accuracy, m.lr, m.seconds);
      metrics->write(m);
      const bool due = spec.checkpoint.every_epochs > 0 && (m.epoch % spec.checkpoint.every_epochs == 0 ||
                                                             m.epoch == spec.train.epochs);
      if (due) {
        communicator.set_progress(position.step, dist::Phase::checkpoint);
        save_checkpoint(checkpoint_path(checkpoints, position), model, *optimizer, position);
        prune_checkpoints(checkpoints, spec.checkpoint.keep);
      }
    }
    result.last = m;
    ++result.epochs_run;
  }

  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (writer) {
    write_final_outputs(model, output_dir, origin, spec, result.last, communicator.world_size(), seconds, data);
    result.model_file = output_dir / "model.pt";
    spdlog::info("wrote {} and {}", result.model_file.string(), (output_dir / "run.json").string());
  }
  communicator.barrier();
  return result;
}

}  // namespace tp::train
