// ResNets against torchvision (Debian's python3-torchvision), initial weights and freezing.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "common/error.h"
#include "model/model.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::model {
namespace {

using testing::shell_quote;

data::Schema images(std::int64_t channels, std::int64_t classes) {
  data::Schema schema;
  schema.input_shape = {channels, 64, 64};
  schema.num_outputs = classes;
  return schema;
}

spec::ModelSpec arch(const std::string& name, const std::string& weights = "") {
  spec::ModelSpec spec;
  spec.arch = name;
  spec.weights = weights;
  return spec;
}

// Runs a Python program with Debian's torch and torchvision; returns what it prints.
std::string python(const testing::TempDir& dir, const std::string& program) {
  testing::write_text(dir / "program.py", "import torch, torchvision\n" + program);
  return testing::run_checked("/usr/bin/python3 " + shell_quote((dir / "program.py").string()));
}

// A dict of tensors saved by Python's torch.save.
std::map<std::string, torch::Tensor> load_tensors(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& entry : torch::pickle_load(bytes).toGenericDict()) {
    tensors.emplace(entry.key().toStringRef(), entry.value().toTensor());
  }
  return tensors;
}

// "name [shape]" for each state_dict entry (parameters and buffers), sorted.
std::set<std::string> state_dict_listing(const torch::jit::Module& module) {
  std::set<std::string> listing;
  const auto add = [&](const std::string& name, const torch::Tensor& tensor) {
    listing.insert(fmt::format("{} [{}]", name, fmt::join(tensor.sizes(), ", ")));
  };
  for (const auto& parameter : module.named_parameters()) add(parameter.name, parameter.value);
  for (const auto& buffer : module.named_buffers()) add(buffer.name, buffer.value);
  return listing;
}

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.insert(line);
  }
  return lines;
}

// torchvision's model with random BatchNorm statistics and affine parameters (fresh ones are the
// identity, which would hide mistakes there), its state dict in `dir`/weights.pt and an input and its
// eval-mode output in `dir`/io.pt.
void export_torchvision(const testing::TempDir& dir, const std::string& arch, std::int64_t classes) {
  python(dir, fmt::format(R"(
torch.manual_seed(0)
model = torchvision.models.{0}(num_classes={1})
for m in model.modules():
    if isinstance(m, torch.nn.BatchNorm2d):
        m.running_mean.uniform_(-0.5, 0.5); m.running_var.uniform_(0.5, 2.0)
        m.weight.data.uniform_(0.5, 1.5); m.bias.data.uniform_(-0.5, 0.5)
        m.num_batches_tracked.fill_(7)
model.eval()
x = torch.randn(2, 3, 64, 64)
with torch.no_grad():
    y = model(x)
torch.save(dict(model.state_dict()), '{2}/weights.pt')
torch.save({{'x': x, 'y': y}}, '{2}/io.pt')
)",
                          arch, classes, dir.path().string()));
}

TEST(ModelResNet, ParameterAndBufferNamesAndShapesAreTorchvisions) {
  testing::TempDir dir;
  for (const std::string name : {"resnet18", "resnet34", "resnet50"}) {
    const auto expected = python(dir, fmt::format(R"(
m = torchvision.models.{}(num_classes=10)
for k, v in m.state_dict().items():
    print('%s [%s]' % (k, ', '.join(str(d) for d in v.shape)))
)",
                                                  name));
    EXPECT_EQ(state_dict_listing(create(arch(name), images(3, 10), ".", 1)), lines_of(expected)) << name;
  }
}

TEST(ModelResNet, InputChannelsAndClassesComeFromTheSchema) {
  auto net = create(arch("resnet18"), images(1, 5), ".", 1);
  EXPECT_EQ(net.attr("conv1").toModule().attr("weight").toTensor().sizes(),
            (std::vector<std::int64_t>{64, 1, 7, 7}));
  EXPECT_EQ(net.forward({torch::randn({2, 1, 64, 64})}).toTensor().sizes(),
            (std::vector<std::int64_t>{2, 5}));
}

TEST(ModelResNet, BlocksShareTheirClasses) {
  auto net = create(arch("resnet50"), images(3, 10), ".", 1);
  std::set<std::string> classes;
  for (const auto& module : net.modules()) classes.insert(module.type()->name()->qualifiedName());
  // ResNet, 4 layers, Bottleneck with and without downsample, Downsample, conv, batch norm, linear.
  EXPECT_EQ(classes.size(), 11u);
}

TEST(ModelResNet, InitialisedAsTorchvision) {
  auto net = create(arch("resnet50"), images(3, 10), ".", 1);
  const auto conv = net.attr("layer1").toModule().attr("0").toModule().attr("conv2").toModule();
  // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std sqrt(2 / (64 * 3 * 3)).
  EXPECT_NEAR(conv.attr("weight").toTensor().std().item<double>(), std::sqrt(2.0 / 576), 0.003);
  const auto bn = net.attr("bn1").toModule();
  EXPECT_TRUE(torch::equal(bn.attr("weight").toTensor(), torch::ones({64})));
  EXPECT_TRUE(torch::equal(bn.attr("bias").toTensor(), torch::zeros({64})));
}

TEST(ModelResNet, TorchvisionWeightsGiveTorchvisionsOutput) {
  for (const std::string name : {"resnet18", "resnet50"}) {
    testing::TempDir dir;
    export_torchvision(dir, name, 10);
    auto net = create(arch(name, "weights.pt"), images(3, 10), dir.path(), 1);
    net.eval();
    const auto io = load_tensors(dir / "io.pt");
    torch::NoGradGuard no_grad;
    const auto output = net.forward({io.at("x")}).toTensor();
    EXPECT_LT((output - io.at("y")).abs().max().item<double>(), 1e-4) << name;
  }
}

TEST(ModelResNet, TrainingModeUpdatesRunningStatistics) {
  auto net = create(arch("resnet18"), images(3, 10), ".", 1);
  net.train();
  net.forward({torch::randn({4, 3, 64, 64}) + 1});
  const auto bn = net.attr("bn1").toModule();
  EXPECT_EQ(bn.attr("num_batches_tracked").toTensor().item<std::int64_t>(), 1);
  EXPECT_FALSE(torch::equal(bn.attr("running_mean").toTensor(), torch::zeros({64})));
  net.eval();
  net.forward({torch::randn({4, 3, 64, 64})});
  EXPECT_EQ(bn.attr("num_batches_tracked").toTensor().item<std::int64_t>(), 1);
}

TEST(ModelResNet, FitsASmallBatch) {
  auto net = create(arch("resnet18"), images(3, 4), ".", 1);
  net.train();
  std::vector<torch::Tensor> parameters;
  for (const auto& parameter : net.parameters()) parameters.push_back(parameter);
  torch::optim::Adam optimizer(parameters, torch::optim::AdamOptions(1e-3));
  const auto inputs = torch::randn({8, 3, 32, 32});
  const auto targets = torch::arange(8) % 4;
  const auto loss = [&] { return torch::cross_entropy_loss(net.forward({inputs}).toTensor(), targets); };
  const double first = loss().item<double>();
  for (int step = 0; step < 15; ++step) {
    optimizer.zero_grad();
    loss().backward();
    optimizer.step();
  }
  EXPECT_LT(loss().item<double>(), first / 4);
}

// Which stages a ResNet runs in NCHW on the CPU (model::kept_nchw_on_cpu): ResNet-18's and -34's last stage at
// 2x2 and smaller feature maps (images up to 64 pixels), no stage of ResNet-50 or for larger images.
TEST(ModelResNet, TheLastStageOfResNet18And34RunsInNchwOnTheCpuForImagesUpTo64Pixels) {
  const auto nchw_stages = [](const std::string& name, std::int64_t side) {
    data::Schema schema = images(3, 10);
    schema.input_shape = {3, side, side};
    const auto net = create(arch(name), schema, ".", 1);
    std::string stages;
    for (const std::string stage : {"conv1", "layer1", "layer2", "layer3", "layer4", "fc"}) {
      if (kept_nchw_on_cpu(net, stage + ".0.conv1.weight") || kept_nchw_on_cpu(net, stage + ".weight")) {
        stages += stage;
      }
    }
    return stages;
  };
  EXPECT_EQ(nchw_stages("resnet18", 64), "layer4");
  EXPECT_EQ(nchw_stages("resnet34", 64), "layer4");
  EXPECT_EQ(nchw_stages("resnet18", 33), "layer4");
  EXPECT_EQ(nchw_stages("resnet18", 65), "");
  EXPECT_EQ(nchw_stages("resnet18", 224), "");
  EXPECT_EQ(nchw_stages("resnet50", 64), "");
  const auto net = create(arch("resnet18"), images(3, 10), ".", 1);
  EXPECT_FALSE(kept_nchw_on_cpu(net, "layer4")) << "a name below the stage, not the stage's own";
  EXPECT_FALSE(kept_nchw_on_cpu(net, "layer40.weight"));
}

TEST(ModelResNet, PythonLoadsTheSavedModelIntoTorchvision) {
  testing::TempDir dir;
  auto net = create(arch("resnet34"), images(3, 10), ".", 4);
  net.train();
  net.forward({torch::randn({4, 3, 64, 64})});  // running statistics that are not the defaults
  net.save((dir / "net.pt").string());
  const auto difference = python(dir, fmt::format(R"(
scripted = torch.jit.load('{0}/net.pt')
reference = torchvision.models.resnet34(num_classes=10)
reference.load_state_dict(scripted.state_dict())
scripted.eval(); reference.eval()
x = torch.randn(2, 3, 64, 64)
print((scripted(x) - reference(x)).abs().max().item())
)",
                                                  dir.path().string()));
  EXPECT_LT(std::stod(difference), 1e-5);
}

void expect_model_error(const std::function<void()>& action, const std::vector<std::string>& fragments) {
  try {
    action();
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model);
    for (const auto& fragment : fragments) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  }
}

TEST(ModelWeights, AHeadOfAnotherShapeKeepsItsInitialisation) {
  testing::TempDir dir;
  export_torchvision(dir, "resnet18", 10);
  const auto fresh = create(arch("resnet18"), images(3, 5), dir.path(), 1);
  const auto loaded = create(arch("resnet18", "weights.pt"), images(3, 5), dir.path(), 1);
  const auto weights = load_tensors(dir / "weights.pt");
  EXPECT_TRUE(
      torch::equal(loaded.attr("conv1").toModule().attr("weight").toTensor(), weights.at("conv1.weight")));
  EXPECT_TRUE(torch::equal(loaded.attr("fc").toModule().attr("weight").toTensor(),
                           fresh.attr("fc").toModule().attr("weight").toTensor()));
}

TEST(ModelWeights, MismatchesNameTheKeys) {
  testing::TempDir dir;
  export_torchvision(dir, "resnet18", 10);
  expect_model_error([&] { create(arch("resnet18", "weights.pt"), images(1, 10), dir.path(), 1); },
                     {"model.weights: weights.pt does not fit the model",
                      "other shape: conv1.weight [64, 3, 7, 7] (model [64, 1, 7, 7])"});
  expect_model_error([&] { create(arch("resnet34", "weights.pt"), images(3, 10), dir.path(), 1); },
                     {"missing: layer1.2.conv1.weight"});
  expect_model_error([&] { create(arch("small_cnn", "weights.pt"), images(3, 10), dir.path(), 1); },
                     {"missing: conv1.bias", "not in the model: bn1.bias"});
  expect_model_error([&] { create(arch("resnet18", "absent.pt"), images(3, 10), dir.path(), 1); },
                     {"model.weights: absent.pt not found in the repository"});
  testing::write_text(dir / "text.pt", "not weights");
  expect_model_error([&] { create(arch("resnet18", "text.pt"), images(3, 10), dir.path(), 1); },
                     {"text.pt is neither a TorchScript module"});
}

TEST(ModelWeights, FromATorchScriptFileButNotFromAnOrderedDict) {
  testing::TempDir dir;
  auto source = create(arch("resnet18"), images(3, 10), ".", 1);
  source.save((dir / "scripted.pt").string());
  auto loaded = create(arch("resnet18", "scripted.pt"), images(3, 10), dir.path(), 2);
  EXPECT_TRUE(torch::equal(loaded.attr("fc").toModule().attr("weight").toTensor(),
                           source.attr("fc").toModule().attr("weight").toTensor()));

  python(dir, "torch.save(torchvision.models.resnet18(num_classes=10).state_dict(), '" +
                  (dir / "ordered.pt").string() + "')\n");
  // libtorch's unpickler cannot rebuild an OrderedDict: the message says how to save a plain dict.
  expect_model_error([&] { create(arch("resnet18", "ordered.pt"), images(3, 10), dir.path(), 1); },
                     {"save a state dict as torch.save(dict(model.state_dict()), path)"});
}

TEST(ModelWeights, FromATrainpointCheckpoint) {
  testing::TempDir dir;
  auto source = create(arch("resnet18"), images(3, 10), ".", 1);
  // train/checkpoint.cpp's layout: the model's tensors prefixed, beside the position and optimizer.
  torch::serialize::OutputArchive archive;
  archive.write("position.epochs_done", torch::tensor(1));
  archive.write("position.step", torch::tensor(10));
  for (const auto& parameter : source.named_parameters())
    archive.write("model." + parameter.name, parameter.value);
  for (const auto& buffer : source.named_buffers()) archive.write("buffer." + buffer.name, buffer.value);
  torch::serialize::OutputArchive optimizer;
  optimizer.write("lr", torch::tensor(0.1));
  archive.write("optimizer", optimizer);
  archive.save_to((dir / "checkpoint.pt").string());
  auto loaded = create(arch("resnet18", "checkpoint.pt"), images(3, 10), dir.path(), 2);
  EXPECT_TRUE(torch::equal(loaded.attr("fc").toModule().attr("weight").toTensor(),
                           source.attr("fc").toModule().attr("weight").toTensor()));
}

TEST(ModelFreezing, TheHeadIsTheLastLayer) {
  EXPECT_EQ(head_parameter_names(create(arch("resnet18"), images(3, 10), ".", 1)),
            (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(head_parameter_names(create(arch("small_cnn"), images(3, 10), ".", 1)),
            (std::vector<std::string>{"fc2.weight", "fc2.bias"}));
  data::Schema table;
  table.input_shape = {6};
  table.num_outputs = 2;
  EXPECT_EQ(head_parameter_names(create(arch("mlp"), table, ".", 1)),
            (std::vector<std::string>{"head.weight", "head.bias"}));
}

TEST(ModelFreezing, AFrozenBodyGetsNoGradientsButItsBatchNormsDo) {
  auto net = create(arch("resnet18"), images(3, 10), ".", 1);
  set_body_trainable(net, false);
  net.train();
  net.forward({torch::randn({2, 3, 64, 64})}).toTensor().sum().backward();
  for (const auto& parameter : net.named_parameters()) {
    const bool batch_norm = parameter.name.find("bn") != std::string::npos ||
                            parameter.name.find("downsample.1") != std::string::npos;
    const bool head = parameter.name.rfind("fc.", 0) == 0;
    EXPECT_EQ(parameter.value.requires_grad(), head || batch_norm) << parameter.name;
    EXPECT_EQ(parameter.value.grad().defined(), head || batch_norm) << parameter.name;
  }
  set_body_trainable(net, true);
  for (const auto& parameter : net.named_parameters())
    EXPECT_TRUE(parameter.value.requires_grad()) << parameter.name;
}

}  // namespace
}  // namespace tp::model
