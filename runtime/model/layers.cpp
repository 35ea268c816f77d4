#include "model/layers.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>

namespace tp::model {
namespace {

// torch.nn.Linear's and Conv2d's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias.
torch::Tensor default_uniform(std::vector<std::int64_t> shape, std::int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return torch::empty(shape).uniform_(-bound, bound);
}

// As torch.nn.Parameter: a leaf that requires grad.
void add_parameter(torch::jit::Module& layer, const std::string& name, const torch::Tensor& value) {
  value.set_requires_grad(true);
  layer.register_parameter(name, value, /*is_buffer=*/false);
}

}  // namespace

torch::jit::Module LayerFactory::module(const std::string& name) {
  const auto known = types_.find(name);
  torch::jit::Module instance = known == types_.end()
                                    ? torch::jit::Module("__torch__.trainpoint." + name, unit_, true)
                                    : torch::jit::Module(unit_, known->second);
  if (known == types_.end()) types_.emplace(name, instance.type());
  // C++ modules start without `training`, which BatchNorm's forward reads and train()/eval() set.
  instance.register_attribute("training", c10::BoolType::get(), true);
  return instance;
}

void LayerFactory::define(torch::jit::Module& module, const std::string& source) {
  if (module.type()->findMethod("forward") == nullptr) module.define(source);
}

torch::jit::Module LayerFactory::linear(std::int64_t in_features, std::int64_t out_features) {
  torch::jit::Module layer = module("Linear");
  add_parameter(layer, "weight", default_uniform({out_features, in_features}, in_features));
  add_parameter(layer, "bias", default_uniform({out_features}, in_features));
  define(layer, R"(
def forward(self, x):
    return torch.linear(x, self.weight, self.bias)
)");
  return layer;
}

torch::jit::Module LayerFactory::linear_without_bias(std::int64_t in_features, std::int64_t out_features) {
  torch::jit::Module layer = module("LinearWithoutBias");
  add_parameter(layer, "weight", default_uniform({out_features, in_features}, in_features));
  define(layer, R"(
def forward(self, x):
    return torch.linear(x, self.weight)
)");
  return layer;
}

torch::jit::Module LayerFactory::conv3x3(std::int64_t in_channels, std::int64_t out_channels) {
  torch::jit::Module layer = module("Conv2d");
  add_parameter(layer, "weight", default_uniform({out_channels, in_channels, 3, 3}, in_channels * 9));
  add_parameter(layer, "bias", default_uniform({out_channels}, in_channels * 9));
  define(layer, R"(
def forward(self, x):
    return torch.conv2d(x, self.weight, self.bias, [1, 1], [1, 1])
)");
  return layer;
}

torch::jit::Module LayerFactory::conv_without_bias(std::int64_t in_channels, std::int64_t out_channels,
                                                   std::int64_t kernel, std::int64_t stride,
                                                   std::int64_t padding) {
  torch::jit::Module layer = module("Conv2dWithoutBias");
  const double std = std::sqrt(2.0 / static_cast<double>(out_channels * kernel * kernel));
  add_parameter(layer, "weight", torch::randn({out_channels, in_channels, kernel, kernel}) * std);
  // Stride and padding are per instance, so one class serves every convolution of a network.
  const auto ints = c10::ListType::ofInts();
  layer.register_attribute("stride", ints, c10::List<std::int64_t>({stride, stride}));
  layer.register_attribute("padding", ints, c10::List<std::int64_t>({padding, padding}));
  define(layer, R"(
def forward(self, x):
    return torch.conv2d(x, self.weight, None, self.stride, self.padding)
)");
  return layer;
}

torch::jit::Module LayerFactory::batch_norm(std::int64_t features) {
  torch::jit::Module layer = module("BatchNorm");
  add_parameter(layer, "weight", torch::ones({features}));
  add_parameter(layer, "bias", torch::zeros({features}));
  layer.register_buffer("running_mean", torch::zeros({features}));
  layer.register_buffer("running_var", torch::ones({features}));
  layer.register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
  // cudnn_enabled=True as torch.nn.functional.batch_norm passes by default: cuDNN's kernels on CUDA.
  define(layer, R"(
def forward(self, x):
    if self.training:
        self.num_batches_tracked.add_(1)
    return torch.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, self.training, 0.1, 1e-05, True)
)");
  return layer;
}

torch::jit::Module sequential(LayerFactory& layers, const std::string& name,
                              const std::vector<torch::jit::Module>& children) {
  torch::jit::Module container = layers.module(name);
  std::string source = "def forward(self, x):\n";
  for (std::size_t i = 0; i < children.size(); ++i) {
    container.register_module(std::to_string(i), children[i]);
    // Names that are not identifiers are reached with getattr, as torch.jit.script does for Sequential.
    source += "    x = getattr(self, \"" + std::to_string(i) + "\").forward(x)\n";
  }
  source += "    return x\n";
  LayerFactory::define(container, source);
  return container;
}

}  // namespace tp::model
