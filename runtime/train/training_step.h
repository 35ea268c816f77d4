// What the training loop (trainer.cpp) and the learning-rate range test (lr_find.cpp) share: the model
// placed for training and its optimizer, batches on the device, the loss, the optimizer step, and which
// samples each epoch trains on this rank. Internal to train.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "spec/spec.h"
#include "train/precision.h"

namespace torch::jit {
struct Module;
}
namespace torch::optim {
class Optimizer;
class OptimizerParamGroup;
}  // namespace torch::optim

namespace tp::train {

// train.optimizer over `groups` (trainer.cpp).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const spec::TrainSpec& spec,
                                                        const std::vector<torch::optim::OptimizerParamGroup>& groups);

// One group, or when fine-tuning two: the body, at lr x body_lr_factor, then the head at lr.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr, double body_lr_factor);

// Before a step's first backward: the optimizer's gradients dropped, not zeroed, so that autograd hands its
// gradient over instead of adding it to zeros (PyTorch's zero_grad and LibTorch 2.x's; LibTorch 1.13's zeroes
// in place: a pass over every gradient to clear it and one to add, 6% of the MLP's 2-rank step there,
// docs/benchmarks.md). Every reader of a gradient takes an undefined one as no gradient.
void drop_gradients(torch::optim::Optimizer& optimizer);

// The optimizer step on gradients already averaged over the ranks: unscaled (fp16), clipped after the
// all-reduce so every rank clips the same gradients, then applied; skipped when fp16 gradients overflowed.
void apply_gradients(Precision& precision, const std::vector<at::Tensor>& parameters, const spec::TrainSpec& train,
                     torch::optim::Optimizer& optimizer);

// What the model and the optimizer work on: the model's parameters, on the device, trainable.
struct Parameters {
  std::vector<at::Tensor> tensors;
  std::vector<std::string> names;
};

// train.channels_last resolved for this model.
bool uses_channels_last(const spec::Spec& spec);

// The model on `device`, in channels_last when the spec says so (but for what the model keeps NCHW on the CPU:
// model::kept_nchw_on_cpu), every parameter trainable.
Parameters place_model(torch::jit::Module& model, const spec::Spec& spec, c10::Device device);

// The spec's batches; pinned memory for a GPU.
data::LoaderOptions loader_options(const spec::Spec& spec, c10::Device device);

// A batch on the training device (copied asynchronously from pinned memory on CUDA).
data::Batch on_device(data::Batch batch, c10::Device device, bool channels_last);

// Every rank starts from rank 0's weights and buffers. Buffers such as BatchNorm's running statistics are
// not averaged afterwards: each rank keeps its own, and the saved model has rank 0's, as PyTorch's DDP
// does with broadcast_buffers at the start.
void start_from_rank_0(torch::jit::Module& model, std::vector<at::Tensor>& parameters,
                       dist::Communicator& communicator);

// (Re)builds the gradient averaging over the parameters that train now (a frozen body gets no gradients);
// none for one rank.
void synchronize_trainable(std::optional<dist::GradientSynchronizer>& synchronizer, const Parameters& parameters,
                           const spec::Spec& spec, dist::Communicator& communicator);

// The task's loss: binary cross-entropy for multi-label, cross-entropy for classification, mean squared
// error for regression.
at::Tensor loss_of(const at::Tensor& output, const at::Tensor& target, const data::Schema& schema,
                   double label_smoothing = 0.0);

// Which samples each epoch trains and how they are split: the whole dataset over the ranks in one global
// order (data/sampler.h), or, when each rank holds its own share (sharded staging), each share in its own
// order, every rank taking as many as the smallest share has. Positions in an epoch count samples of the
// global order (a share's position times the world size when sharded).
class EpochSamples {
 public:
  EpochSamples(const data::Datasets& data, const spec::Spec& spec, dist::Communicator& communicator);

  // The samples an epoch trains in all: its position when it ends.
  std::int64_t in_epoch() const;
  // How many samples each rank trains from `first_sample` on.
  std::size_t per_rank(std::int64_t first_sample) const;
  // The layouts an epoch from `first_sample` on runs under (data/sampler.h): this job's from the start, or
  // `earlier` (an interrupted epoch's, from its checkpoint) and this job's from first_sample when the job's
  // nodes read another order.
  std::vector<data::RankLayout> layouts(std::int64_t first_sample, std::vector<data::RankLayout> earlier) const;
  // This rank's samples of `epoch` from `first_sample` on, in order, under `layouts` (empty: this job's).
  std::vector<std::size_t> of_rank(std::int64_t epoch, std::int64_t first_sample,
                                   const std::vector<data::RankLayout>& layouts = {}) const;

 private:
  bool split_;
  int world_;
  std::size_t size_;
  int ranks_per_node_;
  data::DistributedSampler sampler_;
  std::size_t smallest_share_;
};

}  // namespace tp::train
