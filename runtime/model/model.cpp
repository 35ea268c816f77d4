#include "model/model.h"

#include <dlfcn.h>

#include <spdlog/spdlog.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>

#include "common/error.h"
#include "common/memory.h"
#include "model/builtins.h"
#include "model/layers.h"

namespace tp::model {
namespace {

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  return count;
}

torch::jit::Module mlp(const std::vector<std::int64_t>& hidden, const data::Schema& schema) {
  LayerFactory layers;
  torch::jit::Module net = layers.module("MLP");
  std::int64_t width = element_count(schema.input_shape);
  std::string body = "def forward(self, x):\n    x = torch.flatten(x, 1)\n";
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    const std::string name = "fc" + std::to_string(i + 1);
    net.register_module(name, layers.linear(width, hidden[i]));
    body += "    x = torch.relu_(self." + name + ".forward(x))\n";
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
  torch::jit::Module net = layers.module("SmallCNN");
  net.register_module("conv1", layers.conv3x3(channels, 32));
  net.register_module("conv2", layers.conv3x3(32, 64));
  net.register_module("fc1", layers.linear(64 * pooled, 128));
  net.register_module("fc2", layers.linear(128, schema.num_outputs));
  net.define(R"(
def forward(self, x):
    x = torch.max_pool2d(torch.relu_(self.conv1.forward(x)), [2, 2])
    x = torch.max_pool2d(torch.relu_(self.conv2.forward(x)), [2, 2])
    x = torch.relu_(self.fc1.forward(torch.flatten(x, 1)))
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

bool is_resnet(const std::string& arch) { return arch == "resnet18" || arch == "resnet34" || arch == "resnet50"; }

std::filesystem::path in_repository(const std::filesystem::path& root, const std::string& path) {
  return std::filesystem::path(path).is_absolute() ? std::filesystem::path(path) : root / path;
}

torch::jit::Module build(const spec::ModelSpec& spec, const data::Schema& schema,
                         const std::filesystem::path& root) {
  if (!spec.torchscript.empty())
    return load_torchscript(in_repository(root, spec.torchscript), spec.torchscript);
  if (spec.arch == "mlp") return mlp(spec.hidden, schema);
  if (spec.arch == "small_cnn") return small_cnn(schema);
  if (is_resnet(spec.arch)) return resnet(spec.arch, schema);
  if (spec.arch == "tabular") return tabular(spec.hidden, schema);
  fail(ExitCode::model, "model.arch '{}' is not a built-in architecture", spec.arch);
}

bool is_batch_norm(const torch::jit::Module& module) {
  return module.type()->name()->name().find("BatchNorm") != std::string::npos;
}

// The data's description as attributes of the model (see create()). A model trainpoint saved has them
// already: they take this data's values. An attribute of the same name and another type is the model's own,
// and is kept.
void describe_data(torch::jit::Module& model, const data::Schema& schema) {
  const auto add = [&](const std::string& name, const c10::TypePtr& type, c10::IValue value) {
    if (!model.hasattr(name)) {
      model.register_attribute(name, type, std::move(value));
    } else if (*model.type()->getAttribute(name) == *type) {
      model.setattr(name, std::move(value));
    } else {
      spdlog::warn("the model has its own attribute '{}' ({}): trainpoint's ({}) is not added", name,
                   model.type()->getAttribute(name)->annotation_str(), type->annotation_str());
    }
  };
  using Strings = c10::List<std::string>;
  using Floats = c10::List<double>;
  add("task", c10::StringType::get(), std::string(data::task_name(schema)));
  if (!schema.class_names.empty())
    add("class_names", c10::ListType::ofStrings(), Strings(schema.class_names));
  if (!schema.feature_names.empty()) {
    add("feature_names", c10::ListType::ofStrings(), Strings(schema.feature_names));
    add("feature_mean", c10::ListType::ofFloats(), Floats(schema.feature_mean));
    add("feature_std", c10::ListType::ofFloats(), Floats(schema.feature_std));
    add("feature_fill", c10::ListType::ofFloats(), Floats(schema.feature_fill));
  }
  if (!schema.resize.empty()) {
    add("image_size", c10::IntType::get(), schema.input_shape.at(1));
    add("channels", c10::IntType::get(), schema.input_shape.at(0));
    add("resize", c10::StringType::get(), schema.resize);
    add("pixel_mean", c10::ListType::ofFloats(), Floats(schema.pixel_mean));
    add("pixel_std", c10::ListType::ofFloats(), Floats(schema.pixel_std));
  }
}

// A TorchScript module from the repository is tried on two samples of the data, so that an input it does not
// take or an output that does not match the classes stops the run before training, not in its first step.
void check_outputs(torch::jit::Module& model, const data::Schema& schema, const std::string& file) {
  std::vector<std::int64_t> shape{2};
  shape.insert(shape.end(), schema.input_shape.begin(), schema.input_shape.end());
  torch::Tensor output;
  model.eval();
  try {
    torch::NoGradGuard no_grad;
    const c10::IValue result = model.forward({torch::zeros(shape)});
    if (result.isTensor()) output = result.toTensor();
  } catch (const c10::Error& error) {
    fail(ExitCode::model, "model.torchscript: {} does not take the data's input (a batch shaped [{}]): {}", file,
         fmt::join(shape, ", "), error.what_without_backtrace());
  }
  model.train();
  if (!output.defined()) fail(ExitCode::model, "model.torchscript: {} returns no tensor: it must return the outputs", file);
  const bool matches = output.dim() >= 1 && output.size(0) == 2 &&
                       (schema.classification ? output.dim() == 2 && output.size(1) == schema.num_outputs
                                              : output.numel() == 2);
  if (matches) return;
  const std::string wanted =
      schema.classification
          ? fmt::format("{} outputs, one per class ({})", schema.num_outputs, fmt::join(schema.class_names, ", "))
          : "1 output (data.task = \"regression\")";
  fail(ExitCode::model, "model.torchscript: {} gives outputs shaped [{}] for a batch of 2, but the data needs {}: "
       "export it with that many outputs", file, fmt::join(output.sizes(), ", "), wanted);
}

}  // namespace

data::Schema saved_schema(const torch::jit::Module& model, const std::string& name) {
  const auto strings = [&](const char* attribute) {
    std::vector<std::string> values;
    const c10::impl::GenericList list = model.attr(attribute).toList();
    for (std::size_t i = 0; i < list.size(); ++i) values.push_back(list.get(i).toStringRef());
    return values;
  };
  const auto numbers = [&](const char* attribute) {
    std::vector<double> values;
    const c10::impl::GenericList list = model.attr(attribute).toList();
    for (std::size_t i = 0; i < list.size(); ++i) values.push_back(list.get(i).toDouble());
    return values;
  };
  if (!model.hasattr("task") || !(model.hasattr("feature_names") || model.hasattr("image_size"))) {
    fail(ExitCode::model, "{}: the model does not say how its input is made (no 'task', 'image_size' or "
         "'feature_names' attribute): give a model.pt that trainpoint saved", name);
  }
  data::Schema schema;
  const std::string task = model.attr("task").toStringRef();
  schema.classification = task != "regression";
  schema.multi_label = task == "multi_label";
  if (model.hasattr("class_names")) schema.class_names = strings("class_names");
  schema.num_outputs = schema.classification ? static_cast<std::int64_t>(schema.class_names.size()) : 1;
  if (model.hasattr("feature_names")) {
    schema.feature_names = strings("feature_names");
    schema.feature_mean = numbers("feature_mean");
    schema.feature_std = numbers("feature_std");
    schema.feature_fill = numbers("feature_fill");
    schema.input_shape = {static_cast<std::int64_t>(schema.feature_names.size())};
  } else {
    const std::int64_t size = model.attr("image_size").toInt();
    schema.input_shape = {model.attr("channels").toInt(), size, size};
    schema.resize = model.attr("resize").toStringRef();
    schema.pixel_mean = numbers("pixel_mean");
    schema.pixel_std = numbers("pixel_std");
  }
  return schema;
}

torch::jit::Module create(const spec::ModelSpec& spec, const data::Schema& schema,
                          const std::filesystem::path& root, std::uint64_t seed) {
  torch::manual_seed(seed);
  torch::jit::Module net = build(spec, schema, root);
  if (!spec.weights.empty()) load_weights(net, in_repository(root, spec.weights), spec.weights);
  if (!spec.torchscript.empty()) check_outputs(net, schema, spec.torchscript);
  describe_data(net, schema);
  return net;
}

std::vector<std::string> head_parameter_names(const torch::jit::Module& model) {
  std::string head;
  for (const auto& child : model.named_children()) {
    if (child.value.parameters().size() > 0) head = child.name;
  }
  if (head.empty()) fail(ExitCode::model, "the model has no submodule with parameters to serve as its head");
  std::vector<std::string> names;
  for (const auto& parameter : model.attr(head).toModule().named_parameters()) {
    names.push_back(head + "." + parameter.name);
  }
  return names;
}

void set_body_trainable(torch::jit::Module& model, bool trainable) {
  const std::vector<std::string> head = head_parameter_names(model);
  for (const auto& submodule : model.named_modules()) {
    // Direct parameters only: each is visited once, with the module that owns it.
    for (const auto& parameter : submodule.value.named_parameters(/*recurse=*/false)) {
      const std::string name =
          submodule.name.empty() ? parameter.name : submodule.name + "." + parameter.name;
      const bool in_head = std::find(head.begin(), head.end(), name) != head.end();
      parameter.value.set_requires_grad(trainable || in_head || is_batch_norm(submodule.value));
    }
  }
}

bool is_built_in_convnet(const spec::ModelSpec& spec) {
  return spec.torchscript.empty() && (spec.arch == "small_cnn" || is_resnet(spec.arch));
}

bool kept_nchw_on_cpu(const torch::jit::Module& model, const std::string& parameter_name) {
  if (!model.hasattr(kCpuNchwModules)) return false;
  const c10::IValue modules = model.attr(kCpuNchwModules);
  if (!modules.isList()) return false;
  for (const c10::IValue& module : modules.toList().vec()) {
    if (module.isString() && parameter_name.rfind(module.toStringRef() + ".", 0) == 0) return true;
  }
  return false;
}

void configure_process_for_training() {
  torch::jit::setGraphExecutorOptimize(false);
  keep_freed_memory();
}

void set_compute_threads(int threads) {
  torch::set_num_threads(threads);
  // Looked up rather than linked: LibTorch may use another BLAS (MKL, or OpenBLAS built for OpenMP, which
  // follows LibTorch's OpenMP setting).
  using SetThreads = void (*)(int);
  if (auto* set_blas_threads = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas_threads(threads);
  }
}

}  // namespace tp::model
