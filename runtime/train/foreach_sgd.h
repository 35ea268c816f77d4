// train.optimizer = "sgd": torch::optim::SGD's arithmetic, options and state (checkpoints are the same either
// way), with its step done by multi-tensor (foreach) kernels, a few launches for all the parameters instead of
// about three per parameter, as PyTorch's SGD does by default on CUDA. On a GPU the per-parameter kernels of
// ResNet-50's 161 parameters cost a few percent of each step (docs/benchmarks.md, "On one H200").
#pragma once

#include <torch/optim/sgd.h>

namespace tp::train {

class ForeachSGD final : public torch::optim::SGD {
 public:
  using torch::optim::SGD::SGD;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace tp::train
