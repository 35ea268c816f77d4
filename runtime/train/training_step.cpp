#include "train/training_step.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>

#include "common/error.h"
#include "common/log.h"
#include "model/model.h"
#include "train/foreach_sgd.h"

namespace tp::train {
namespace {

// NHWC strides. Not contiguous(ChannelsLast): with one channel (grayscale images, their first convolution's
// weights) it keeps the NCHW strides, which are NHWC-contiguous too, and the convolution then stays NCHW
// and its max pooling ran 10x slower on the CPU.
torch::Tensor to_channels_last(const torch::Tensor& tensor) {
  return tensor.to(tensor.options(), /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::ChannelsLast);
}

// The fewest samples any rank holds, for data that is already one share per rank.
std::size_t smallest_share(const data::DistributedSampler& sampler, dist::Communicator& communicator) {
  return static_cast<std::size_t>(
      dist::min_over_ranks(communicator, static_cast<std::int64_t>(sampler.samples_per_rank())));
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const spec::TrainSpec& spec,
                                                        const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  switch (spec.optimizer) {
    case spec::Optimizer::sgd:
      return std::make_unique<ForeachSGD>(groups, torch::optim::SGDOptions(spec.lr)
                                                      .momentum(spec.momentum)
                                                      .nesterov(spec.nesterov)
                                                      .weight_decay(spec.weight_decay));
    case spec::Optimizer::adam:
      return std::make_unique<torch::optim::Adam>(
          groups, torch::optim::AdamOptions(spec.lr).betas({spec.momentum, 0.999}).weight_decay(spec.weight_decay));
    case spec::Optimizer::adamw:
      return std::make_unique<torch::optim::AdamW>(
          groups, torch::optim::AdamWOptions(spec.lr).betas({spec.momentum, 0.999}).weight_decay(spec.weight_decay));
  }
  spec::unhandled(spec.optimizer);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, double body_lr_factor) {
  auto& groups = optimizer.param_groups();
  for (std::size_t i = 0; i < groups.size(); ++i) {
    groups[i].options().set_lr(i + 1 < groups.size() ? lr * body_lr_factor : lr);
  }
}

void drop_gradients(torch::optim::Optimizer& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    for (auto& parameter : group.params()) parameter.mutable_grad().reset();
  }
}

void apply_gradients(Precision& precision, const std::vector<torch::Tensor>& parameters,
                     const spec::TrainSpec& train, torch::optim::Optimizer& optimizer) {
  if (!precision.unscale(parameters)) return;
  if (train.clip_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, train.clip_norm);
  optimizer.step();
}

bool uses_channels_last(const spec::Spec& spec) {
  if (spec.train.channels_last == "auto") return model::is_built_in_convnet(spec.model);
  return spec.train.channels_last == "true";
}

Parameters place_model(torch::jit::Module& model, const spec::Spec& spec, c10::Device device) {
  model::configure_process_for_training();
  // Images come in one size and batches in one shape (but the last): cuDNN's timed choice of each
  // convolution's algorithm pays after the first steps, as torch.backends.cudnn.benchmark does in Python.
  if (device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);
  model.to(device);
  const bool channels_last = uses_channels_last(spec);
  if (channels_last) {
    spdlog::info("images and convolution weights in channels_last memory format (train.channels_last = {})",
                 spec.train.channels_last);
  }
  Parameters parameters;
  torch::NoGradGuard no_grad;
  for (const auto& parameter : model.named_parameters()) {
    const bool nchw_here = device.is_cpu() && model::kept_nchw_on_cpu(model, parameter.name);
    if (channels_last && parameter.value.dim() == 4 && !nchw_here) {
      parameter.value.set_data(to_channels_last(parameter.value));
    }
    parameter.value.set_requires_grad(true);
    parameters.tensors.push_back(parameter.value);
    parameters.names.push_back(parameter.name);
  }
  if (parameters.tensors.empty()) fail(ExitCode::model, "the model has no parameters to train");
  return parameters;
}

data::LoaderOptions loader_options(const spec::Spec& spec, c10::Device device) {
  data::LoaderOptions options;
  options.batch_size = spec.train.batch_size;
  options.workers = static_cast<int>(spec.data.workers);
  options.pin_memory = device.is_cuda();
  return options;
}

data::Batch on_device(data::Batch batch, c10::Device device, bool channels_last) {
  batch.inputs = batch.inputs.to(device, /*non_blocking=*/true);
  if (channels_last && batch.inputs.dim() == 4) batch.inputs = to_channels_last(batch.inputs);
  batch.targets = batch.targets.to(device, /*non_blocking=*/true);
  return batch;
}

void start_from_rank_0(torch::jit::Module& model, std::vector<torch::Tensor>& parameters,
                       dist::Communicator& communicator) {
  torch::NoGradGuard no_grad;
  communicator.broadcast(parameters, 0);
  std::vector<torch::Tensor> buffers;
  for (const auto& buffer : model.buffers()) buffers.push_back(buffer);
  if (!buffers.empty()) communicator.broadcast(buffers, 0);
}

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
                      double label_smoothing) {
  if (schema.multi_label) return torch::binary_cross_entropy_with_logits(output, target.to(torch::kFloat));
  if (schema.classification) {
    return torch::nn::functional::cross_entropy(
        output, target, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
  }
  return torch::mse_loss(output.reshape({-1}), target.to(torch::kFloat));
}

EpochSamples::EpochSamples(const data::Datasets& data, const spec::Spec& spec, dist::Communicator& communicator)
    : split_(!data.rank_share),
      world_(communicator.world_size()),
      size_(data.train->size()),
      ranks_per_node_(split_ ? data.ranks_per_node : 1),
      sampler_({data.train->size(), split_ ? communicator.rank() : 0, split_ ? world_ : 1, true, spec.data.drop_last,
                static_cast<std::uint64_t>(spec.job.seed), data.train_shard_sizes,
                static_cast<std::size_t>(spec.data.shuffle_buffer), ranks_per_node_}),
      smallest_share_(split_ ? 0 : smallest_share(sampler_, communicator)) {}

std::int64_t EpochSamples::in_epoch() const {
  const std::size_t covered = per_rank(0) * static_cast<std::size_t>(world_);  // padding included
  return static_cast<std::int64_t>(split_ ? std::min(covered, size_) : covered);
}

std::size_t EpochSamples::per_rank(std::int64_t first_sample) const {
  if (split_) return sampler_.samples_per_rank(static_cast<std::size_t>(first_sample));
  return smallest_share_ - std::min(static_cast<std::size_t>(first_sample / world_), smallest_share_);
}

std::vector<data::RankLayout> EpochSamples::layouts(std::int64_t first_sample,
                                                    std::vector<data::RankLayout> earlier) const {
  const data::RankLayout mine{static_cast<std::size_t>(first_sample), world_, ranks_per_node_};
  if (first_sample == 0) return {{0, world_, ranks_per_node_}};
  if (earlier.empty()) earlier = {{0, 1, 1}};  // a checkpoint from before layouts were kept: one node's order
  const data::RankLayout& last = earlier.back();
  const auto one_node = [](const data::RankLayout& layout) { return layout.world_size == layout.ranks_per_node; };
  if ((one_node(last) && one_node(mine)) || (last.world_size == world_ && last.ranks_per_node == ranks_per_node_)) {
    earlier.back() = {last.from_sample, world_, ranks_per_node_};  // the same order: the same stretch goes on
  } else {
    earlier.push_back(mine);
  }
  return earlier;
}

std::vector<std::size_t> EpochSamples::of_rank(std::int64_t epoch, std::int64_t first_sample,
                                               const std::vector<data::RankLayout>& layouts) const {
  if (split_) return sampler_.indices(epoch, static_cast<std::size_t>(first_sample), layouts);
  std::vector<std::size_t> indices = sampler_.indices(epoch, static_cast<std::size_t>(first_sample / world_));
  indices.resize(std::min(indices.size(), per_rank(first_sample)));
  return indices;
}

}  // namespace tp::train
