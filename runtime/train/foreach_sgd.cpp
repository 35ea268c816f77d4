#include "train/foreach_sgd.h"

#include <torch/torch.h>

#include <vector>

#include "dist/c10d_compat.h"

namespace tp::train {
namespace {

using StateMap = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

}  // namespace

// What torch::optim::SGD::step computes for each parameter p with a gradient g, for all of a group at once:
//   d = g + weight_decay * p
//   b = d (the first step), else b = momentum * b + (1 - dampening) * d
//   p -= lr * (nesterov ? d + momentum * b : b)      (d alone without momentum)
torch::Tensor ForeachSGD::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    std::vector<torch::Tensor> parameters, steps;
    for (const auto& parameter : group.params()) {
      if (!parameter.grad().defined()) continue;
      parameters.push_back(parameter);
      steps.push_back(parameter.grad());
    }
    if (parameters.empty()) continue;
    if (options.weight_decay() != 0) steps = at::_foreach_add(steps, parameters, options.weight_decay());
    if (options.momentum() != 0) {
      std::vector<torch::Tensor> buffers, continued, their_steps;
      for (std::size_t i = 0; i < parameters.size(); ++i) {
        auto& entry = state()[dist::compat::optimizer_state_key<StateMap>(parameters[i])];
        if (!entry) {
          auto first = std::make_unique<torch::optim::SGDParamState>();
          first->momentum_buffer(torch::clone(steps[i]).detach());
          buffers.push_back(first->momentum_buffer());
          entry = std::move(first);
          continue;
        }
        buffers.push_back(static_cast<torch::optim::SGDParamState&>(*entry).momentum_buffer());
        continued.push_back(buffers.back());
        their_steps.push_back(steps[i]);
      }
      if (!continued.empty()) {
        at::_foreach_mul_(continued, options.momentum());
        at::_foreach_add_(continued, their_steps, 1 - options.dampening());
      }
      steps = options.nesterov() ? at::_foreach_add(steps, buffers, options.momentum()) : buffers;
    }
    at::_foreach_add_(parameters, steps, -options.lr());
  }
  return loss;
}

}  // namespace tp::train
