#include "model/model.h"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "common/error.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::model {
namespace {

spec::ModelSpec arch(const std::string& name) {
  spec::ModelSpec spec;
  spec.arch = name;
  spec.hidden = {32, 16};
  return spec;
}

data::Schema schema(std::vector<std::int64_t> input_shape, std::int64_t outputs, bool classification) {
  data::Schema schema;
  schema.input_shape = std::move(input_shape);
  schema.num_outputs = outputs;
  schema.classification = classification;
  return schema;
}

data::Schema image_schema() {
  return schema({3, 32, 32}, 4, true);
}

std::vector<std::string> parameter_names(const torch::jit::Module& module) {
  std::vector<std::string> names;
  for (const auto& parameter : module.named_parameters()) names.push_back(parameter.name);
  return names;
}

TEST(Model, SmallCnnHasTorchNamesAndOutputShape) {
  auto net = create(arch("small_cnn"), image_schema(), ".", 1);
  EXPECT_EQ(parameter_names(net),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                      "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  const auto output = net.forward({torch::randn({5, 3, 32, 32})}).toTensor();
  EXPECT_EQ(output.sizes(), (std::vector<std::int64_t>{5, 4}));
  EXPECT_EQ(net.attr("fc1").toModule().attr("weight").toTensor().size(1), 64 * 8 * 8);
}

TEST(Model, MlpFlattensInputs) {
  auto net = create(arch("mlp"), schema({7}, 1, false), ".", 1);
  EXPECT_EQ(parameter_names(net), (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight",
                                                            "fc2.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(net.forward({torch::randn({3, 7})}).toTensor().sizes(), (std::vector<std::int64_t>{3, 1}));
}

TEST(Model, SameSeedSameWeightsOtherSeedOtherWeights) {
  auto a = create(arch("small_cnn"), image_schema(), ".", 7);
  auto b = create(arch("small_cnn"), image_schema(), ".", 7);
  auto c = create(arch("small_cnn"), image_schema(), ".", 8);
  const auto weight = [](const torch::jit::Module& m) {
    return m.attr("conv1").toModule().attr("weight").toTensor();
  };
  EXPECT_TRUE(torch::equal(weight(a), weight(b)));
  EXPECT_FALSE(torch::equal(weight(a), weight(c)));
}

TEST(Model, SmallCnnRejectsTables) {
  try {
    create(arch("small_cnn"), schema({7}, 2, true), ".", 1);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model);
    EXPECT_NE(std::string(error.what()).find("needs images"), std::string::npos);
  }
}

TEST(Model, SavedBuiltinLoadsAsTorchScriptAndTorchScriptLoadsFromTheRepository) {
  testing::TempDir dir;
  auto net = create(arch("small_cnn"), image_schema(), ".", 3);
  std::filesystem::create_directories(dir / "models");
  net.save((dir / "models/net.pt").string());
  spec::ModelSpec from_file;
  from_file.torchscript = "models/net.pt";
  auto loaded = create(from_file, image_schema(), dir.path(), 3);
  const auto input = torch::randn({2, 3, 32, 32});
  EXPECT_TRUE(torch::allclose(net.forward({input}).toTensor(), loaded.forward({input}).toTensor()));
}

TEST(Model, MissingOrBadTorchScriptIsAModelError) {
  testing::TempDir dir;
  spec::ModelSpec spec;
  spec.torchscript = "models/absent.pt";
  try {
    create(spec, image_schema(), dir.path(), 1);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model);
    EXPECT_STREQ(error.what(), "model.torchscript: models/absent.pt not found in the repository");
  }
  testing::write_text(dir / "models/bad.pt", "not a zip");
  spec.torchscript = "models/bad.pt";
  try {
    create(spec, image_schema(), dir.path(), 1);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model);
    EXPECT_NE(std::string(error.what()).find("is not a TorchScript module"), std::string::npos);
    EXPECT_EQ(std::string(error.what()).find("Exception raised from"), std::string::npos)
        << "no C++ stack trace";
  }
}

TEST(Model, PythonTorchLoadsTheSavedBuiltin) {
  testing::TempDir dir;
  auto net = create(arch("small_cnn"), image_schema(), ".", 3);
  net.eval();
  net.save((dir / "net.pt").string());
  const auto input = torch::ones({1, 3, 32, 32});
  const float expected = net.forward({input}).toTensor()[0][0].item<float>();
  const auto result = testing::run_command("/usr/bin/python3 -c \"import torch; m = torch.jit.load('" +
                                           (dir / "net.pt").string() +
                                           "'); print('%.6f' % m(torch.ones(1, 3, 32, 32))[0][0].item())\"");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NEAR(std::stod(result.output), expected, 1e-5);
}

data::Schema table_schema() {
  data::Schema table = schema({7}, 3, true);
  table.feature_names = {"age", "color=blue", "color=red", "income", "city=a", "city=b", "city=c"};
  return table;
}

TEST(Model, TabularEmbedsEachCategoricalColumnAndNormalizesTheContinuousOnes) {
  auto net = create(arch("tabular"), table_schema(), ".", 1);
  std::vector<std::string> shapes;
  for (const auto& parameter : net.named_parameters()) {
    shapes.push_back(fmt::format("{} [{}]", parameter.name, fmt::join(parameter.value.sizes(), ", ")));
  }
  // fastai's embedding sizes: round(1.6 * (levels + 1)^0.56): 3 for color, 3 for city.
  EXPECT_EQ(shapes, (std::vector<std::string>{
                        "embeds.0.weight [3, 2]", "embeds.1.weight [3, 3]", "bn_cont.weight [2]",
                        "bn_cont.bias [2]", "layers.0.linear.weight [32, 8]", "layers.0.bn.weight [32]",
                        "layers.0.bn.bias [32]", "layers.1.linear.weight [16, 32]", "layers.1.bn.weight [16]",
                        "layers.1.bn.bias [16]", "head.weight [3, 16]", "head.bias [3]"}));
  EXPECT_EQ(head_parameter_names(net), (std::vector<std::string>{"head.weight", "head.bias"}));
}

TEST(Model, TabularReadsEachFeatureFromItsColumn) {
  auto net = create(arch("tabular"), table_schema(), ".", 1);
  net.train();
  auto input = torch::randn({4, 7}).requires_grad_();
  net.forward({input}).toTensor().pow(2).sum().backward();
  // Every feature reaches the output, through its embedding or the continuous batch norm.
  EXPECT_TRUE((input.grad().abs().sum(0) > 0).all().item<bool>());
  EXPECT_EQ(net.attr("bn_cont").toModule().attr("num_batches_tracked").toTensor().item<std::int64_t>(), 1);
}

TEST(Model, TabularWithoutCategoriesAndPythonLoadsIt) {
  data::Schema table = schema({2}, 1, false);
  table.feature_names = {"a", "b"};
  testing::TempDir dir;
  auto net = create(arch("tabular"), table, ".", 1);
  net.eval();
  net.save((dir / "net.pt").string());
  const float expected = net.forward({torch::ones({1, 2})}).toTensor()[0][0].item<float>();
  const auto result = testing::run_command(
      "/usr/bin/python3 -c \"import torch; m = torch.jit.load('" + (dir / "net.pt").string() +
      "'); m.eval(); print('%.6f' % m(torch.ones(1, 2))[0][0].item())\"");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NEAR(std::stod(result.output), expected, 1e-5);
}

std::vector<std::string> strings_of(const torch::jit::Module& model, const std::string& name) {
  std::vector<std::string> values;
  const c10::IValue list = model.attr(name);  // held: the loop reads into it (GCC 14's -Wdangling-reference)
  for (const auto& value : list.toListRef()) values.push_back(value.toStringRef());
  return values;
}

std::vector<double> floats_of(const torch::jit::Module& model, const std::string& name) {
  std::vector<double> values;
  const c10::IValue list = model.attr(name);
  for (const auto& value : list.toListRef()) values.push_back(value.toDouble());
  return values;
}

TEST(Model, CarriesTheDataItWasMadeForAndTakesTheNewDataInASavedModel) {
  data::Schema table = schema({2}, 2, true);
  table.class_names = {"no", "yes"};
  table.feature_names = {"a", "a=#na#"};
  table.feature_mean = {1, 0.5};
  table.feature_std = {3, 0.5};
  table.feature_fill = {7, std::nan("")};
  testing::TempDir dir;
  auto net = create(arch("mlp"), table, ".", 1);
  EXPECT_EQ(strings_of(net, "class_names"), table.class_names);
  EXPECT_EQ(strings_of(net, "feature_names"), table.feature_names);
  EXPECT_EQ(floats_of(net, "feature_mean"), table.feature_mean);
  EXPECT_EQ(floats_of(net, "feature_std"), table.feature_std);
  EXPECT_EQ(floats_of(net, "feature_fill")[0], 7);
  EXPECT_TRUE(std::isnan(floats_of(net, "feature_fill")[1]));
  net.save((dir / "net.pt").string());

  // Trained again from the saved model on other data: the attributes describe the new data.
  table.class_names = {"low", "high"};
  table.feature_mean = {10, 0.25};
  spec::ModelSpec from_file;
  from_file.torchscript = "net.pt";
  auto again = create(from_file, table, dir.path(), 1);
  EXPECT_EQ(strings_of(again, "class_names"), table.class_names);
  EXPECT_EQ(floats_of(again, "feature_mean"), table.feature_mean);
  EXPECT_EQ(parameter_names(again), parameter_names(net));

  // A model's own attribute of the same name and another type stays as it is.
  torch::jit::Module own("Own");
  own.register_attribute("class_names", c10::IntType::get(), 3);
  own.define("def forward(self, x):\n    return x\n");
  own.save((dir / "own.pt").string());
  from_file.torchscript = "own.pt";
  EXPECT_EQ(create(from_file, table, dir.path(), 1).attr("class_names").toInt(), 3);
}

TEST(Model, TabularNeedsNamedFeatures) {
  try {
    create(arch("tabular"), image_schema(), ".", 1);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model);
    EXPECT_NE(std::string(error.what()).find("needs table_csv data"), std::string::npos);
  }
}

}  // namespace
}  // namespace tp::model
