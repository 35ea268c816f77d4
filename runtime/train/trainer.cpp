#include "train/trainer.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signals.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dist/c10d_compat.h"
#include "dist/gradient_sync.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/report.h"
#include "train/schedule.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const spec::TrainSpec& spec,
                                                        const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  if (spec.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(groups, torch::optim::SGDOptions(spec.lr)
                                                           .momentum(spec.momentum)
                                                           .nesterov(spec.nesterov)
                                                           .weight_decay(spec.weight_decay));
  }
  if (spec.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(
        groups, torch::optim::AdamOptions(spec.lr).betas({spec.momentum, 0.999}).weight_decay(spec.weight_decay));
  }
  return std::make_unique<torch::optim::AdamW>(
      groups, torch::optim::AdamWOptions(spec.lr).betas({spec.momentum, 0.999}).weight_decay(spec.weight_decay));
}

// One group, or when fine-tuning two: the body, at lr x body_lr_factor, then the head at lr.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, double body_lr_factor) {
  auto& groups = optimizer.param_groups();
  for (std::size_t i = 0; i < groups.size(); ++i) {
    groups[i].options().set_lr(i + 1 < groups.size() ? lr * body_lr_factor : lr);
  }
}

// train.precision on this rank's device: autocast of the forward pass (bf16 on the CPU or CUDA, fp16 on
// CUDA) and, for fp16, dynamic loss scaling as torch.cuda.amp.GradScaler does it: the loss is multiplied
// by the scale before backward; a step whose gradients overflow is skipped and the scale halved; after
// 2000 steps without overflow it doubles.
class Precision {
 public:
  Precision(const std::string& precision, c10::Device device) : device_(device.type()) {
    if (precision == "fp16" && !device.is_cuda()) {
      fail(ExitCode::usage, "train.precision = fp16 needs a CUDA device, and this rank trains on the CPU: use bf16 "
           "(CPU autocast) or fp32");
    }
    if (precision != "fp32") autocast_ = precision == "bf16" ? at::kBFloat16 : at::kHalf;
    if (precision == "fp16") scale_ = 65536.0;
  }

  // The model's output in fp32: losses and metrics are computed in full precision.
  torch::Tensor forward(torch::jit::Module& model, const torch::Tensor& inputs) const {
    if (!autocast_) return model.forward({inputs}).toTensor();
    struct Scope {  // leaving drops the weights' cached casts, as torch.autocast does on exit
      at::DeviceType device;
      at::ScalarType dtype;
      ~Scope() { dist::compat::set_autocast(device, false, dtype); }
    } scope{device_, *autocast_};
    dist::compat::set_autocast(device_, true, *autocast_);
    return model.forward({inputs}).toTensor().to(torch::kFloat);
  }

  torch::Tensor scaled(const torch::Tensor& loss) const { return scale_ ? loss * *scale_ : loss; }

  // After the all-reduce (every rank has the same gradients, so every rank decides the same): divides the
  // gradients by the scale. False when they overflowed: the step must be skipped.
  bool unscale(const std::vector<torch::Tensor>& parameters) {
    if (!scale_) return true;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> grads;
    for (const auto& parameter : parameters) {
      if (parameter.grad().defined()) grads.push_back(parameter.grad());
    }
    // One device-to-host sync for all the gradients, not one per tensor.
    std::vector<torch::Tensor> finite_each;
    for (const auto& grad : grads) finite_each.push_back(torch::isfinite(grad).all());
    const bool finite = finite_each.empty() || torch::stack(finite_each).all().item<bool>();
    if (!finite) {
      *scale_ /= 2;
      good_steps_ = 0;
      spdlog::debug("fp16: gradients overflowed; step skipped, loss scale now {:g}", *scale_);
      return false;
    }
    for (auto& grad : grads) grad.mul_(1.0 / *scale_);
    if (++good_steps_ == 2000) {
      *scale_ *= 2;
      good_steps_ = 0;
    }
    return true;
  }

 private:
  at::DeviceType device_;
  std::optional<at::ScalarType> autocast_;
  std::optional<double> scale_;
  int good_steps_ = 0;
};

// The optimizer step on gradients already averaged over the ranks: unscaled (fp16), clipped after the
// all-reduce so every rank clips the same gradients, then applied; skipped when fp16 gradients overflowed.
void apply_gradients(Precision& precision, const std::vector<torch::Tensor>& parameters,
                     const spec::TrainSpec& train, torch::optim::Optimizer& optimizer) {
  if (!precision.unscale(parameters)) return;
  if (train.clip_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, train.clip_norm);
  optimizer.step();
}

// What the model and the optimizer work on: the model's parameters, on the device, trainable.
struct Parameters {
  std::vector<torch::Tensor> tensors;
  std::vector<std::string> names;
};

// NHWC strides. Not contiguous(ChannelsLast): with one channel (grayscale images, their first convolution's
// weights) it keeps the NCHW strides, which are NHWC-contiguous too, and the convolution then stays NCHW
// and its max pooling ran 10x slower on the CPU.
torch::Tensor to_channels_last(const torch::Tensor& tensor) {
  return tensor.to(tensor.options(), /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::ChannelsLast);
}

// train.channels_last resolved for this model.
bool uses_channels_last(const spec::Spec& spec) {
  if (spec.train.channels_last == "auto") return model::is_built_in_convnet(spec.model);
  return spec.train.channels_last == "true";
}

Parameters place_model(torch::jit::Module& model, const spec::Spec& spec, c10::Device device) {
  model::configure_process_for_training();
  model.to(device);
  const bool channels_last = uses_channels_last(spec);
  if (channels_last) {
    spdlog::info("images and convolution weights in channels_last memory format (train.channels_last = {})",
                 spec.train.channels_last);
  }
  Parameters parameters;
  torch::NoGradGuard no_grad;
  for (const auto& parameter : model.named_parameters()) {
    if (channels_last && parameter.value.dim() == 4) {
      parameter.value.set_data(to_channels_last(parameter.value));
    }
    parameter.value.set_requires_grad(true);
    parameters.tensors.push_back(parameter.value);
    parameters.names.push_back(parameter.name);
  }
  if (parameters.tensors.empty()) fail(ExitCode::model, "the model has no parameters to train");
  return parameters;
}

// The spec's batches, from `first_batch` on; pinned memory for a GPU.
data::LoaderOptions loader_options(const spec::Spec& spec, c10::Device device, std::size_t first_batch = 0) {
  data::LoaderOptions options;
  options.batch_size = spec.train.batch_size;
  options.workers = static_cast<int>(spec.data.workers);
  options.first_batch = first_batch;
  options.pin_memory = device.is_cuda();
  return options;
}

// A batch on the training device (copied asynchronously from pinned memory on CUDA).
data::Batch on_device(data::Batch batch, c10::Device device, bool channels_last) {
  batch.inputs = batch.inputs.to(device, /*non_blocking=*/true);
  if (channels_last && batch.inputs.dim() == 4) batch.inputs = to_channels_last(batch.inputs);
  batch.targets = batch.targets.to(device, /*non_blocking=*/true);
  return batch;
}

// Every rank starts from rank 0's weights and buffers. Buffers such as BatchNorm's running statistics are
// not averaged afterwards: each rank keeps its own, and the saved model has rank 0's, as PyTorch's DDP
// does with broadcast_buffers at the start.
void start_from_rank_0(torch::jit::Module& model, std::vector<torch::Tensor>& parameters,
                       dist::Communicator& communicator) {
  torch::NoGradGuard no_grad;
  communicator.broadcast(parameters, 0);
  std::vector<torch::Tensor> buffers;
  for (const auto& buffer : model.buffers()) buffers.push_back(buffer);
  if (!buffers.empty()) communicator.broadcast(buffers, 0);
}

// (Re)builds the gradient averaging over the parameters that train now (a frozen body gets no gradients);
// none for one rank.
void synchronize_trainable(std::optional<dist::GradientSynchronizer>& synchronizer, const Parameters& parameters,
                           const spec::Spec& spec, dist::Communicator& communicator) {
  synchronizer.reset();
  if (communicator.world_size() == 1) return;
  std::vector<torch::Tensor> trainable;
  std::vector<std::string> trainable_names;
  for (std::size_t i = 0; i < parameters.tensors.size(); ++i) {
    if (!parameters.tensors[i].requires_grad()) continue;
    trainable.push_back(parameters.tensors[i]);
    trainable_names.push_back(parameters.names[i]);
  }
  synchronizer.emplace(trainable, trainable_names, communicator,
                       dist::BucketOptions{1 << 20, static_cast<std::size_t>(spec.dist.bucket_mb) << 20,
                                           spec.dist.allow_unused_parameters});
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

// Whether top-k accuracy is reported: single-label classification with more than k classes.
bool reports_top_k(const data::Schema& schema, std::int64_t k) {
  return schema.classification && !schema.multi_label && schema.num_outputs > k;
}

// Samples whose target is among the k highest scores.
double top_k_correct_in(const torch::Tensor& output, const torch::Tensor& target, std::int64_t k) {
  return std::get<1>(output.topk(k, 1)).eq(target.unsqueeze(1)).any(1).sum().item<double>();
}

// The next batch, with the phase published while it loads.
std::optional<data::Batch> next_batch(data::Loader& loader, dist::Communicator& communicator, std::int64_t step) {
  communicator.set_progress(step, dist::Phase::data);
  return loader.next();
}

struct Totals {
  double loss_sum = 0;
  double correct = 0;
  double top_k_correct = 0;
  double absolute_error = 0;  // regression
  double count = 0;
};

// Sums per-rank totals over all ranks.
Totals all_ranks(const Totals& mine, dist::Communicator& communicator) {
  std::vector<torch::Tensor> values{torch::tensor(
      {mine.loss_sum, mine.correct, mine.top_k_correct, mine.absolute_error, mine.count}, torch::kDouble)};
  communicator.all_reduce_sum(values);
  const auto sums = values[0];
  return {sums[0].item<double>(), sums[1].item<double>(), sums[2].item<double>(), sums[3].item<double>(),
          sums[4].item<double>()};
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
                dist::Communicator& communicator, const Precision& precision, c10::Device device) {
  const std::size_t first = data.rank_share ? 0 : static_cast<std::size_t>(communicator.rank());
  const std::size_t stride = data.rank_share ? 1 : static_cast<std::size_t>(communicator.world_size());
  Totals totals;
  std::vector<std::size_t> mine;
  for (std::size_t i = first; i < data.valid->size(); i += stride) mine.push_back(i);
  torch::NoGradGuard no_grad;
  model.eval();
  data::Loader loader(data.valid, mine, 0, loader_options(spec, device));
  while (auto next = loader.next()) {
    const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
    const torch::Tensor output = precision.forward(model, batch.inputs);
    const double n = static_cast<double>(batch.targets.size(0));
    totals.loss_sum += loss_of(output, batch.targets, data.schema).item<double>() * n;
    if (data.schema.classification) totals.correct += correct_in(output, batch.targets, data.schema);
    if (reports_top_k(data.schema, spec.train.top_k)) {
      totals.top_k_correct += top_k_correct_in(output, batch.targets, spec.train.top_k);
    }
    if (!data.schema.classification) {
      totals.absolute_error += (output.reshape({-1}) - batch.targets.to(torch::kFloat)).abs().sum().item<double>();
    }
    totals.count += n;
  }
  model.train();
  return all_ranks(totals, communicator);
}

// Every rank's bad files, sorted and without duplicates: an all-gather of the names built from sums,
// each rank filling its own slot of a zeroed buffer.
std::vector<std::string> all_bad_files(const data::BadFiles& bad_files, dist::Communicator& communicator) {
  const std::vector<std::string> mine = bad_files.files();
  if (communicator.world_size() == 1) return mine;
  std::string text;
  for (const auto& file : mine) text += file + '\n';
  std::vector<torch::Tensor> lengths{torch::zeros({communicator.world_size()}, torch::kLong)};
  lengths[0][communicator.rank()] = static_cast<std::int64_t>(text.size());
  communicator.all_reduce_sum(lengths);
  const std::int64_t total = lengths[0].sum().item<std::int64_t>();
  if (total == 0) return {};
  const std::int64_t offset = lengths[0].slice(0, 0, communicator.rank()).sum().item<std::int64_t>();
  std::vector<torch::Tensor> bytes{torch::zeros({total}, torch::kInt)};
  std::copy(text.begin(), text.end(), bytes[0].data_ptr<int>() + offset);
  communicator.all_reduce_sum(bytes);
  const int* gathered = bytes[0].data_ptr<int>();
  std::set<std::string> all;
  std::string name;
  for (std::int64_t i = 0; i < total; ++i) {
    const char c = static_cast<char>(gathered[i]);
    if (c != '\n') {
      name += c;
    } else if (!name.empty()) {
      all.insert(name);
      name.clear();
    }
  }
  return {all.begin(), all.end()};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The run record: run.json at the end, and the report's facts at every epoch end.
struct RunFacts {
  const RunOrigin& origin;
  const spec::Spec& spec;
  const data::Datasets& data;
  int world_size;
  std::string started;
};

nlohmann::json run_record(const RunFacts& facts, const EpochMetrics& last, const std::vector<std::string>& bad_files,
                          double seconds) {
  const data::Datasets& data = facts.data;
  return {
      {"job", facts.spec.job.name},
      {"source", {{"repo", facts.origin.repo}, {"ref", facts.origin.ref}, {"commit", facts.origin.commit},
                  {"spec", facts.origin.spec_name}}},
      {"resolved_spec", facts.origin.resolved_spec},
      {"world_size", facts.world_size},
      {"data", {{"train_samples", data.train->size()}, {"valid_samples", data.valid ? data.valid->size() : 0},
                {"classes", data.schema.class_names}, {"bad_files", bad_files}}},
      {"final", {{"epoch", last.epoch}, {"train_loss", json_number(last.train_loss)},
                 {"valid_loss", json_number(last.valid_loss)}, {"accuracy", json_number(last.valid_accuracy)},
                 {"error_rate", json_number(last.error_rate)},
                 {"top_k_accuracy", json_number(last.top_k_accuracy)}, {"top_k", facts.spec.train.top_k},
                 {"mae", json_number(last.mae)}, {"mse", json_number(last.mse)}}},
      {"started", facts.started},
      {"seconds", seconds},
      {"versions", {{"trainpoint", TRAINPOINT_VERSION_STRING}, {"libtorch", TORCH_VERSION}}},
  };
}

// On the CPU, so that the model loads anywhere (Python's torch.jit.load puts tensors where they were).
void write_model(torch::jit::Module& model, const fs::path& output_dir) {
  const fs::path model_file = output_dir / "model.pt";
  const fs::path temporary = temporary_sibling(model_file);
  model.to(torch::kCPU);
  model.eval();
  model.save(temporary.string());
  commit_file(temporary, model_file);
}

}  // namespace

FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const fs::path& output_dir, const RunOrigin& origin,
              const FitEnvironment& environment) {
  const auto published = [&](const fs::path& file) {
    if (environment.publish) environment.publish(file);
  };
  const c10::Device device = environment.device;
  const auto started = Clock::now();
  const RunFacts facts{origin, spec, data, communicator.world_size(), utc_now()};
  const bool writer = communicator.rank() == 0;
  const fs::path checkpoints = output_dir / "checkpoints";
  Precision precision(spec.train.precision, device);
  // The final outputs of an earlier run go first: only a run that finishes writes them again.
  if (writer) {
    fs::create_directories(output_dir);
    fs::remove(output_dir / "run.json");
    fs::remove(output_dir / "model.pt");
  }

  Parameters placed = place_model(model, spec, device);
  std::vector<torch::Tensor>& parameters = placed.tensors;
  const std::vector<std::string>& names = placed.names;
  // Fine-tuning: the body and the head in two optimizer groups, so the body can have its own lr.
  const bool fine_tune = spec.train.freeze_epochs > 0;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (fine_tune) {
    const std::vector<std::string> head = model::head_parameter_names(model);
    std::vector<torch::Tensor> body_parameters, head_parameters;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const bool in_head = std::find(head.begin(), head.end(), names[i]) != head.end();
      (in_head ? head_parameters : body_parameters).push_back(parameters[i]);
    }
    groups.emplace_back(body_parameters);
    groups.emplace_back(head_parameters);
  } else {
    groups.emplace_back(parameters);
  }
  auto optimizer = make_optimizer(spec.train, groups);
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

  start_from_rank_0(model, parameters, communicator);  // after rank 0 resumed
  // Built again whenever fine-tuning freezes or unfreezes the body (at the same epoch on every rank).
  std::optional<dist::GradientSynchronizer> synchronizer;
  if (!fine_tune) synchronize_trainable(synchronizer, placed, spec, communicator);

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
  const std::int64_t total_steps = steps_per_epoch * spec.train.epochs;
  const std::int64_t frozen_steps = steps_per_epoch * spec.train.freeze_epochs;
  const ScheduleOptions schedule{spec.train.schedule, peak_lr, spec.train.warmup, total_steps,
                                 steps_per_epoch, spec.train.step_every, spec.train.step_gamma};
  // Fine-tuning runs one schedule over the frozen epochs and another over the rest, as fastai's
  // fine_tune calls fit_one_cycle twice.
  auto lr_at = [&](std::int64_t step) {
    ScheduleOptions phase = schedule;
    if (step < frozen_steps) {
      phase.total_steps = frozen_steps;
      return learning_rate(phase, step);
    }
    phase.total_steps = total_steps - frozen_steps;
    return learning_rate(phase, step - frozen_steps);
  };
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
  if (writer) metrics = std::make_unique<MetricsLog>(output_dir, position.epochs_done, position.step);
  const std::int64_t top_k = reports_top_k(data.schema, spec.train.top_k) ? spec.train.top_k : 0;
  install_stop_handlers();

  FitResult result;
  std::optional<bool> body_frozen;
  for (std::int64_t epoch = position.epochs_done; epoch < spec.train.epochs; ++epoch) {
    // The phase follows from the epoch alone, so a resumed run continues in the right one.
    if (fine_tune && body_frozen != (epoch < spec.train.freeze_epochs)) {
      body_frozen = epoch < spec.train.freeze_epochs;
      model::set_body_trainable(model, !*body_frozen);
      synchronize_trainable(synchronizer, placed, spec, communicator);
      if (writer && *body_frozen) {
        spdlog::info("fine-tuning: the head trains alone for {} epoch(s), the body frozen", spec.train.freeze_epochs);
      } else if (writer) {
        spdlog::info("fine-tuning: the body trains from epoch {} at lr x {:g}", epoch + 1, spec.train.body_lr_factor);
      }
    }
    const auto epoch_started = Clock::now();
    std::vector<std::size_t> indices = sampler.indices(epoch);
    indices.resize(std::min(indices.size(), samples_per_rank));
    data::Loader loader(data.train, std::move(indices), epoch,
                        loader_options(spec, device, static_cast<std::size_t>(position.batches_done)));
    // Rank 0 speaks for the job; the other ranks log only warnings and errors.
    std::optional<log::Progress> progress;
    if (writer) {
      progress.emplace(fmt::format("epoch {}/{}", epoch + 1, spec.train.epochs), loader.num_batches(), "batches");
      progress->advance(loader.position());
    }
    Totals train_totals;
    double lr = peak_lr;
    double step_loss_sum = 0;  // this step's batches, for its record
    int step_batches = 0;
    try {
      while (auto next = next_batch(loader, communicator, position.step)) {
        const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
        // With accumulation, gradients are summed locally over `accumulate` batches and averaged
        // across ranks only on the last one (DDP's no_sync).
        const std::int64_t micro = (static_cast<std::int64_t>(loader.position()) - 1) % accumulate;
        const bool stepping = micro == accumulate - 1 || loader.position() == loader.num_batches();
        if (micro == 0) {
          lr = lr_at(position.step);
          set_learning_rate(*optimizer, lr, spec.train.body_lr_factor);
          optimizer->zero_grad();
        }
        communicator.set_progress(position.step, dist::Phase::forward);
        const torch::Tensor output = precision.forward(model, batch.inputs);
        const torch::Tensor loss = loss_of(output, batch.targets, data.schema, spec.train.label_smoothing);
        const double loss_value = loss.item<double>();
        if (!std::isfinite(loss_value)) {
          fail(ExitCode::training, "the loss became {} at epoch {} step {}: lower train.lr (now {:g})", loss_value,
               epoch + 1, position.step, lr);
        }
        if (synchronizer) synchronizer->set_enabled(stepping);
        communicator.set_progress(position.step, dist::Phase::backward);
        precision.scaled(accumulate > 1 ? loss / static_cast<double>(accumulate) : loss).backward();
        const double n = static_cast<double>(batch.targets.size(0));
        train_totals.loss_sum += loss_value * n;
        train_totals.count += n;
        step_loss_sum += loss_value;
        ++step_batches;
        if (progress) {
          progress->set_note(fmt::format("loss {:.4f}", train_totals.loss_sum / train_totals.count));
          progress->advance();
        }
        if (!stepping) continue;
        if (synchronizer) synchronizer->finish();
        apply_gradients(precision, parameters, spec.train, *optimizer);
        ++position.step;
        if (metrics) metrics->write_step({position.step, lr, step_loss_sum / step_batches});
        step_loss_sum = 0;
        step_batches = 0;
        if (stop_agreed(communicator)) {
          position.batches_done = static_cast<std::int64_t>(loader.position());
          const fs::path saved = checkpoint_path(checkpoints, position);
          communicator.set_progress(position.step, dist::Phase::checkpoint);
          if (writer) {
            save_checkpoint(saved, model, *optimizer, position);
            published(saved);
          }
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
    m.valid_loss = m.valid_accuracy = m.error_rate = m.top_k_accuracy = m.mae = m.mse = std::nan("");
    if (data.valid && data.valid->size() > 0) {
      communicator.set_progress(position.step, dist::Phase::validate);
      const Totals valid = validate(model, data, spec, communicator, precision, device);
      m.valid_loss = valid.loss_sum / valid.count;
      if (data.schema.classification) {
        m.valid_accuracy = valid.correct / valid.count;
        m.error_rate = 1.0 - m.valid_accuracy;
      } else {
        m.mae = valid.absolute_error / valid.count;
        m.mse = m.valid_loss;  // the regression loss is the mean squared error
      }
      if (top_k > 0) m.top_k_accuracy = valid.top_k_correct / valid.count;
    }
    m.seconds = std::chrono::duration<double>(Clock::now() - epoch_started).count();
    const std::vector<std::string> bad_files = all_bad_files(*data.bad_files, communicator);
    if (writer) {
      const std::string validation = describe_validation(m, top_k);
      spdlog::info("epoch {}/{}: train_loss {:.4f}{}{} lr {:.3g} ({:.1f}s)", m.epoch, spec.train.epochs,
                   m.train_loss, validation.empty() ? "" : " ", validation, m.lr, m.seconds);
      metrics->write_epoch(m);
      const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
      write_report(output_dir / "report.html",
                   {run_record(facts, m, bad_files, elapsed), metrics->steps(), metrics->epochs(), spec.train.epochs,
                    top_k, false});
      const bool due = spec.checkpoint.every_epochs > 0 && (m.epoch % spec.checkpoint.every_epochs == 0 ||
                                                             m.epoch == spec.train.epochs);
      if (due) {
        communicator.set_progress(position.step, dist::Phase::checkpoint);
        const fs::path saved = checkpoint_path(checkpoints, position);
        save_checkpoint(saved, model, *optimizer, position);
        published(saved);
        for (const fs::path& pruned : prune_checkpoints(checkpoints, spec.checkpoint.keep)) {
          if (environment.withdraw) environment.withdraw(pruned);
        }
      }
      for (const char* record : {"metrics.jsonl", "metrics.csv", "steps.jsonl", "report.html"}) {
        published(output_dir / record);
      }
    }
    result.last = m;
    ++result.epochs_run;
  }

  const std::vector<std::string> bad_files = all_bad_files(*data.bad_files, communicator);
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (writer) {
    // A resumed run that had nothing left to train reports the epoch its records end with.
    const EpochMetrics last = metrics->epochs().empty() ? result.last : metrics->epochs().back();
    const nlohmann::json record = run_record(facts, last, bad_files, seconds);
    write_report(output_dir / "report.html",
                 {record, metrics->steps(), metrics->epochs(), spec.train.epochs, top_k, true});
    write_model(model, output_dir);
    write_file_atomic(output_dir / "run.json", record.dump(2) + "\n");
    result.model_file = output_dir / "model.pt";
    published(output_dir / "report.html");
    published(result.model_file);
    published(output_dir / "run.json");
    spdlog::info("wrote {} and {}", result.model_file.string(), (output_dir / "run.json").string());
  }
  communicator.barrier();
  return result;
}

LrFindResult find_learning_rate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                                dist::Communicator& communicator, const fs::path& output_dir,
                                const FitEnvironment& environment) {
  constexpr double kStartLr = 1e-7, kEndLr = 10.0, kBeta = 0.98;
  constexpr std::int64_t kSteps = 100;
  const c10::Device device = environment.device;
  Precision precision(spec.train.precision, device);
  Parameters placed = place_model(model, spec, device);
  std::vector<torch::Tensor>& parameters = placed.tensors;
  if (spec.train.freeze_epochs > 0) model::set_body_trainable(model, false);
  auto optimizer = make_optimizer(spec.train, {torch::optim::OptimizerParamGroup(parameters)});
  model.train();
  start_from_rank_0(model, parameters, communicator);
  std::optional<dist::GradientSynchronizer> synchronizer;
  synchronize_trainable(synchronizer, placed, spec, communicator);
  const bool split_here = !data.rank_share;
  data::DistributedSampler sampler({data.train->size(), split_here ? communicator.rank() : 0,
                                    split_here ? communicator.world_size() : 1, true, spec.data.drop_last,
                                    static_cast<std::uint64_t>(spec.job.seed)});
  const std::size_t samples_per_rank = split_here ? sampler.samples_per_rank() : smallest_share(sampler, communicator);

  LrFindResult result;
  double average = 0, best = INFINITY;
  bool done = false;
  for (std::int64_t epoch = 0; !done; ++epoch) {
    std::vector<std::size_t> indices = sampler.indices(epoch);
    indices.resize(std::min(indices.size(), samples_per_rank));
    data::Loader loader(data.train, std::move(indices), epoch, loader_options(spec, device));
    if (loader.num_batches() == 0) fail(ExitCode::data, "lr_find: no training samples on rank {}", communicator.rank());
    try {
      while (auto next = loader.next()) {
        const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
        const auto step = static_cast<std::int64_t>(result.points.size());
        const double lr = kStartLr * std::pow(kEndLr / kStartLr, static_cast<double>(step) / (kSteps - 1));
        set_learning_rate(*optimizer, lr, 1.0);
        optimizer->zero_grad();
        const torch::Tensor loss = loss_of(precision.forward(model, batch.inputs), batch.targets, data.schema,
                                           spec.train.label_smoothing);
        precision.scaled(loss).backward();
        if (synchronizer) synchronizer->finish();
        apply_gradients(precision, parameters, spec.train, *optimizer);
        std::vector<torch::Tensor> losses{loss.detach().to(torch::kDouble).reshape({1})};
        communicator.all_reduce_sum(losses);
        const double mean_loss = losses[0].item<double>() / communicator.world_size();
        average = kBeta * average + (1 - kBeta) * mean_loss;
        const double smoothed = average / (1 - std::pow(kBeta, static_cast<double>(step + 1)));
        result.points.push_back({step + 1, lr, mean_loss, smoothed});
        best = std::min(best, smoothed);
        done = !std::isfinite(smoothed) || smoothed > 4 * best || step + 1 == kSteps;
        if (done) break;
      }
    } catch (const c10::Error& error) {
      fail(ExitCode::training, "lr_find: {}", error.what_without_backtrace());
    }
  }

  // As fastai, the suggestions skip the first tenth of the planned steps (the average is still
  // settling) and the last 5 (the loss blowing up), unless that leaves too few.
  const std::size_t n = result.points.size();
  std::size_t first = kSteps / 10, end = n > 5 ? n - 5 : n;
  if (end < first + 2) {
    first = 0;
    end = n;
  }
  std::size_t lowest = first, steepest = first;
  double steepest_slope = INFINITY;
  for (std::size_t i = first; i < end; ++i) {
    if (result.points[i].smoothed_loss < result.points[lowest].smoothed_loss) lowest = i;
    if (i + 1 >= end) continue;
    const auto& here = result.points[i];
    const auto& next = result.points[i + 1];
    const double slope = (next.smoothed_loss - here.smoothed_loss) / (std::log(next.lr) - std::log(here.lr));
    if (slope < steepest_slope) {
      steepest_slope = slope;
      steepest = i;
    }
  }
  result.suggested_lr = result.points[lowest].lr / 10;
  result.steepest_lr = result.points[steepest].lr;
  if (communicator.rank() == 0) {
    fs::create_directories(output_dir);
    std::string lines;
    for (const LrFindPoint& p : result.points) {
      lines += nlohmann::json{{"step", p.step}, {"lr", p.lr}, {"loss", json_number(p.loss)},
                              {"smoothed_loss", json_number(p.smoothed_loss)}}
                   .dump() +
               "\n";
    }
    write_file_atomic(output_dir / "lr_find.jsonl", lines);
    write_file_atomic(output_dir / "lr_find.html",
                      render_lr_find(spec.job.name, result.points, result.suggested_lr, result.steepest_lr));
    spdlog::info("lr_find: {} steps; suggested train.lr {:.3g} (a tenth of the lr with the lowest loss, {:.3g}); "
                 "steepest descent at {:.3g}; see {}",
                 result.points.size(), result.suggested_lr, result.points[lowest].lr, result.steepest_lr,
                 (output_dir / "lr_find.html").string());
  }
  communicator.barrier();
  return result;
}

}  // namespace tp::train
