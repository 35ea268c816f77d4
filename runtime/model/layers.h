// Building blocks of the built-in models: TorchScript classes defined once per model in a shared
// compilation unit, each layer an instance with its own parameters. Parameter and buffer names follow
// torch.nn (weight, bias, running_mean...), so the models' state_dict keys are PyTorch's.
// Internal to tp_model.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tp::model {

class LayerFactory {
 public:
  // torch.nn.Linear with its default initialisation.
  torch::jit::Module linear(std::int64_t in_features, std::int64_t out_features);
  // torch.nn.Linear(bias=False), initialised as torch.nn.Linear.
  torch::jit::Module linear_without_bias(std::int64_t in_features, std::int64_t out_features);
  // torch.nn.Conv2d(kernel_size=3, padding=1) with its default initialisation.
  torch::jit::Module conv3x3(std::int64_t in_channels, std::int64_t out_channels);
  // torch.nn.Conv2d(bias=False) initialised as torchvision's ResNet does (kaiming_normal_, fan_out, relu).
  torch::jit::Module conv_without_bias(std::int64_t in_channels, std::int64_t out_channels,
                                       std::int64_t kernel, std::int64_t stride, std::int64_t padding);
  // torch.nn.BatchNorm1d/2d (momentum 0.1, eps 1e-5): weight 1, bias 0, running statistics as buffers.
  torch::jit::Module batch_norm(std::int64_t features);

  // An instance of the class `name` in this factory's unit: the first call creates the class, later
  // calls give further instances, which must get the same attributes (define() is then a no-op).
  torch::jit::Module module(const std::string& name);
  // Defines `source` (its forward) on the class of `module` unless that class has it already.
  static void define(torch::jit::Module& module, const std::string& source);

 private:
  std::shared_ptr<torch::jit::CompilationUnit> unit_ = std::make_shared<torch::jit::CompilationUnit>();
  std::map<std::string, c10::ClassTypePtr> types_;
};

// A container whose submodules are named "0", "1"... as torch.nn.Sequential's, calling them in order.
// Children of one class structure share one class, named `name`.
torch::jit::Module sequential(LayerFactory& layers, const std::string& name,
                              const std::vector<torch::jit::Module>& children);

}  // namespace tp::model
