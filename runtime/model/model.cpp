#include "model/model.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cmath>

#include "common/error.h"

namespace tp::model {
namespace {

// Layers are TorchScript classes defined once in a shared compilation unit; each layer is an
// instance with its own parameters. Parameter names follow torch.nn (weight, bias).
class LayerFactory {
 public:
  torch::jit::Module linear(std::int64_t in_features, std::int64_t out_features) {
    // torch.nn.Linear's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    return instance(linear_type_, "Linear", R"(
def forward(self, x):
    return torch.linear(x, self.weight, self.bias)
)",
                    torch::empty({out_features, in_features}).uniform_(-bound, bound),
                    torch::empty({out_features}).uniform_(-bound, bound));
  }

  torch::jit::Module conv3x3(std::int64_t in_channels, std::int64_t out_channels) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_channels * 9));
    return instance(conv_type_, "Conv2d", R"(
def forward(self, x):
    return torch.conv2d(x, self.weight, self.bias, [1, 1], [1, 1])
)",
                    torch::empty({out_channels, in_channels, 3, 3}).uniform_(-bound, bound),
                    torch::empty({out_channels}).uniform_(-bound, bound));
  }

  torch::jit::Module container(const std::string& name) {
    return torch::jit::Module("__torch__.trainpoint." + name, unit_, true);
  }

 private:
  torch::jit::Module instance(c10::ClassTypePtr& type, const std::string& name, const std::string& source,
                              torch::Tensor weight, torch::Tensor bias) {
    const bool first = type == nullptr;
    torch::jit::Module layer = first ? container(name) : torch::jit::Module(unit_, type);
    layer.register_parameter("weight", weight, false);
    layer.register_parameter("bias", bias, false);
    if (first) {
      layer.define(source);
      type = layer.type();
    }
    return layer;
  }

  std::shared_ptr<torch::jit::CompilationUnit> unit_ = std::make_shared<torch::jit::CompilationUnit>();
  c10::ClassTypePtr linear_type_;
  c10::ClassTypePtr conv_type_;
};

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  return count;
}

torch::jit::Module mlp(const std::vector<std::int64_t>& hidden, const data::Schema& schema) {
  LayerFactory layers;
  torch::jit::Module net = layers.container("MLP");
  std::int64_t width = element_count(schema.input_shape);
  std::string body = "def forward(self, x):\n    x = torch.flatten(x, 1)\n";
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    const std::string name = "fc" + std::to_string(i + 1);
    net.register_module(name, layers.linear(width, hidden[i]));
    body += "    x = torch.relu(self." + name + ".forward(x))\n";
    width = hidden[i];
  }
  net.register_module("head", layers.linear(width, schema.num_outputs));
  body += "    return self.head.forward(x)\n";
  net.define(body);
  return net;
}

// Two 3x3 convolutions (32 and 64 channels) with ReLU and 2x2 max pooling, then fc1 (128) and fc2.
torch::jit::Module small_cnn(const data::Schema& schema) {
  if (schema.input_shape.size() != 3) {
    fail(ExitCode::model, "model.arch 'small_cnn' needs images, but samples have shape [{}]",
         fmt::join(schema.input_shape, ", "));
  }
  const std::int64_t channels = schema.input_shape[0];
  const std::int64_t pooled = (schema.input_shape[1] / 4) * (schema.input_shape[2] / 4);
  if (pooled == 0) fail(ExitCode::model, "model.arch 'small_cnn' needs images of at least 4x4 pixels");
  LayerFactory layers;
  torch::jit::Module net = layers.container("SmallCNN");
  net.register_module("conv1", layers.conv3x3(channels, 32));
  net.register_module("conv2", layers.conv3x3(32, 64));
  net.register_module("fc1", layers.linear(64 * pooled, 128));
  net.register_module("fc2", layers.linear(128, schema.num_outputs));
  net.define(R"(
def forward(self, x):
    x = torch.max_pool2d(torch.relu(self.conv1.forward(x)), [2, 2])
    x = torch.max_pool2d(torch.relu(self.conv2.forward(x)), [2, 2])
    x = torch.relu(self.fc1.forward(torch.flatten(x, 1)))
    return self.fc2.forward(x)
)");
  return net;
}

torch::jit::Module load_torchscript(const std::filesystem::path& file, const std::string& as_named) {
  if (!std::filesystem::is_regular_file(file)) {
    fail(ExitCode::model, "model.torchscript: {} not found in the repository", as_named);
  }
  try {
    return torch::jit::load(file.string());
  } catch (const c10::Error& error) {
    fail(ExitCode::model, "model.torchscript: {} is not a TorchScript module: {}", as_named,
         error.what_without_backtrace());
  }
}

}  // namespace

torch::jit::Module create(const spec::ModelSpec& spec, const data::Schema& schema, const std::filesystem::path& root,
                          std::uint64_t seed) {
  torch::manual_seed(seed);
  if (!spec.torchscript.empty()) {
    const std::filesystem::path file = std::filesystem::path(spec.torchscript).is_absolute()
                                           ? std::filesystem::path(spec.torchscript)
                                           : root / spec.torchscript;
    return load_torchscript(file, spec.torchscript);
  }
  if (spec.arch == "mlp") return mlp(spec.hidden, schema);
  if (spec.arch == "small_cnn") return small_cnn(schema);
  fail(ExitCode::model, "model.arch '{}' is not a built-in architecture", spec.arch);
}

}  // namespace tp::model
