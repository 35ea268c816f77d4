// What the model gets wrong (train/interpretation.h) from real training runs: an image folder whose validation
// folder has circles filed as squares, trained on one rank and on two; a regression. The numbers are checked
// against scikit-learn (check_interpretation.py, run by the python3 of scripts/install-python-tools) and the
// report is rendered by Chromium.
#include "train/interpretation.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

#include "common/base64.h"
#include "data/dataset.h"
#include "data/labelled_images.h"
#include "data/image.h"
#include "data/make_dataset.h"
#include "model/model.h"
#include "spec/spec.h"
#include "support/process.h"
#include "support/ranks_on_threads.h"
#include "support/temp_dir.h"
#include "train/trainer.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& file) {
  std::ifstream in(file);
  return json::parse(in);
}

std::vector<json> read_lines(const fs::path& file) {
  std::vector<json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// What scikit-learn computes from interpretation.json's own predictions (check_interpretation.py).
json scikit_learns_scores(const fs::path& interpretation) {
  const auto checked = testing::run_command(
      testing::shell_quote(testing::tools_python()) + " " +
      testing::shell_quote(testing::source_dir() + "/tests/train/check_interpretation.py") + " " +
      testing::shell_quote(interpretation.string()));
  if (checked.exit_code != 0) {
    ADD_FAILURE() << checked.output << "\n(scikit-learn comes from scripts/install-python-tools)";
    return json::object();
  }
  return json::parse(checked.output.substr(checked.output.find('{')));
}

// The last epoch's F1 in metrics.jsonl (summed over ranks during validation) equals scikit-learn's from the
// gathered predictions of the same model: the macro average and each class's.
void expect_epoch_f1_as_sklearn(const json& last_epoch, const json& interpretation, const json& sklearn) {
  ASSERT_TRUE(sklearn.contains("macro_f1")) << sklearn.dump();
  EXPECT_NEAR(last_epoch["f1"].get<double>(), sklearn["macro_f1"].get<double>(), 1e-12) << last_epoch.dump();
  for (std::size_t c = 0; c < interpretation["classes"].size(); ++c) {
    const std::string name = interpretation["classes"][c];
    EXPECT_NEAR(last_epoch["class_f1"][name].get<double>(), sklearn["f1"][c].get<double>(), 1e-12) << name;
  }
}

// The files directly in `dir`, sorted.
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// fastai's layout under `root`: train/ and valid/ of circles, squares and triangles (make-dataset's first three
// shapes), then `mislabelled` of the validation circles moved into valid/square/. Returns the moved files'
// names as interpretation.json names them (relative to `root`).
std::vector<std::string> shapes_with_mislabelled_circles(const fs::path& root, int valid_per_class,
                                                         std::size_t mislabelled) {
  for (const auto& [split, per_class, seed] :
       {std::tuple{"train", 60, 1}, std::tuple{"valid", valid_per_class, 2}}) {
    data::MakeDatasetRequest shapes;
    shapes.out = (root / split).string();
    shapes.classes = 3;
    shapes.count = 3 * per_class;
    shapes.width = shapes.height = 24;
    shapes.seed = static_cast<std::uint64_t>(seed);
    data::make_dataset(shapes);
  }
  std::vector<std::string> moved;
  const std::vector<fs::path> circles = files_in(root / "valid/circle");
  for (std::size_t i = 0; i < mislabelled; ++i) {
    const fs::path to = root / "valid/square" / ("was-circle-" + circles[i].filename().string());
    fs::rename(circles[i], to);
    moved.push_back(to.lexically_relative(root).generic_string());
  }
  return moved;
}

spec::Spec shapes_spec(const fs::path& data, std::int64_t top_losses) {
  spec::Spec spec = spec::load_string(
                        "[job]\nseed = 3\n"
                        "[data]\nsource = " + json(data.string()).dump() +
                            "\nformat = \"image_folder\"\nimage_size = 24\nworkers = 1\n"
                        "[model]\narch = \"small_cnn\"\n"
                        "[train]\nepochs = 10\nbatch_size = 16\nlr = 3e-3\n"
                        "[checkpoint]\nevery_epochs = 0\n",
                        {}, "test")
                        .spec;
  spec.report.top_losses = top_losses;
  return spec;
}

const RunOrigin kOrigin{"repo", "main", "abc123", "train.toml", ""};

// Trains the shapes with 4 validation circles filed as squares: those 4 are among the 8 highest losses, with
// their thumbnails, and "square predicted as circle" is the most confused pair; the numbers agree with
// scikit-learn's from the saved predictions; the per-class scores reach metrics.jsonl; Chromium draws the
// report's matrix and thumbnails.
TEST(Interpretation, MislabelledImagesAreTheTopLossesAndTheirPairTheMostConfused) {
  testing::TempDir dir;
  const std::vector<std::string> moved = shapes_with_mislabelled_circles(dir / "data", 20, 4);
  const spec::Spec spec = shapes_spec(dir / "data", 8);
  const data::Datasets data = data::open(spec.data, dir.path(), spec.job.seed);
  auto model = model::create(spec.model, data.schema, ".", spec.job.seed);
  auto single = dist::single_process();
  std::vector<fs::path> published;
  FitEnvironment environment;
  environment.publish = [&](const fs::path& file) { published.push_back(file); };
  const FitResult result = fit(model, data, spec, *single, dir / "out", kOrigin, environment);
  ASSERT_GT(result.last.valid_accuracy, 0.85) << "the model must learn the shapes for the test to mean anything";

  const json interpretation = read_json(dir / "out/interpretation.json");
  EXPECT_EQ(interpretation["task"], "classification");
  EXPECT_EQ(interpretation["epoch"], 10);
  EXPECT_EQ(interpretation["samples"], 60);
  EXPECT_EQ(interpretation["classes"], json::array({"circle", "square", "triangle"}));
  EXPECT_DOUBLE_EQ(interpretation["accuracy"].get<double>(), result.last.valid_accuracy);
  // The mislabelled circles: the most confused pair, and every one of them among the top losses.
  ASSERT_FALSE(interpretation["most_confused"].empty());
  const json& most = interpretation["most_confused"][0];
  EXPECT_EQ(most["actual"], "square");
  EXPECT_EQ(most["predicted"], "circle");
  EXPECT_GE(most["count"].get<int>(), 3);
  const json& top = interpretation["top_losses"];
  ASSERT_EQ(top.size(), 8u);
  std::set<std::string> top_names;
  for (std::size_t i = 0; i < top.size(); ++i) {
    top_names.insert(top[i]["sample"].get<std::string>());
    if (i > 0) {
      EXPECT_GE(top[i - 1]["loss"].get<double>(), top[i]["loss"].get<double>()) << "sorted by loss";
    }
    // Each thumbnail is a JPEG of the 24x24 input the model saw.
    const std::string uri = top[i]["thumbnail"].get<std::string>();
    const std::string prefix = "data:image/jpeg;base64,";
    ASSERT_EQ(uri.rfind(prefix, 0), 0u) << uri.substr(0, 40);
    const std::string payload = uri.substr(prefix.size());
    EXPECT_GT(payload.size(), 200u);
  }
  std::size_t found = 0;
  for (const std::string& name : moved) {
    found += top_names.count(name);
    const auto it = std::find_if(top.begin(), top.end(), [&](const json& t) { return t["sample"] == name; });
    if (it == top.end()) continue;
    EXPECT_EQ((*it)["actual"], "square") << name;
  }
  EXPECT_GE(found, 3u) << "the mislabelled files " << json(moved).dump() << " among the top losses "
                       << json(std::vector<std::string>(top_names.begin(), top_names.end())).dump();
  // The top losses name the validation files relative to the data's folder.
  for (const std::string& name : top_names) EXPECT_TRUE(fs::exists(dir / "data" / name)) << name;

  // Every validation sample once, with its prediction; the matrix and the scores as scikit-learn computes them.
  EXPECT_EQ(interpretation["predictions"].size(), 60u);
  const json sklearn = scikit_learns_scores(dir / "out/interpretation.json");
  expect_epoch_f1_as_sklearn(read_lines(dir / "out/metrics.jsonl").back(), interpretation, sklearn);
  EXPECT_EQ(interpretation["confusion_matrix"], sklearn["confusion_matrix"]);
  EXPECT_LT(sklearn["max_difference"].get<double>(), 1e-12);
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(interpretation["per_class"][c]["support"], sklearn["support"][c]);
  }
  EXPECT_EQ(sklearn["support"], json::array({16, 24, 20})) << "4 circles filed as squares";

  // metrics.jsonl's last line carries the per-class scores, the earlier ones none.
  const std::vector<json> metrics = read_lines(dir / "out/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 10u);
  EXPECT_FALSE(metrics.front().contains("per_class"));
  EXPECT_EQ(metrics.back()["per_class"]["square"]["f1"], interpretation["per_class"][1]["f1"]);
  EXPECT_EQ(metrics.back()["per_class"]["circle"]["support"], 16);
  EXPECT_EQ(std::count(published.begin(), published.end(), dir / "out/interpretation.json"), 1);

  // The report: the matrix, the per-class table and the thumbnails, drawn by Chromium.
  std::ifstream report_file(dir / "out/report.html");
  std::stringstream report;
  report << report_file.rdbuf();
  EXPECT_NE(report.str().find("What the model gets wrong"), std::string::npos);
  EXPECT_NE(report.str().find("class=\"confusion\""), std::string::npos);
  EXPECT_NE(report.str().find(moved.front()), std::string::npos) << "a mislabelled file is named";
  const auto found_chromium = testing::run_command("command -v chromium");
  ASSERT_EQ(found_chromium.exit_code, 0)
      << "chromium is not installed: scripts/install-deps --tests installs it (scripts/deps/debian-test.txt)";
  const fs::path screenshot = dir / "report.png";
  const auto rendered = testing::run_command(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars "
      "--user-data-dir=" + testing::shell_quote((dir / "profile").string()) +
      " --window-size=1200,2400 --screenshot=" + testing::shell_quote(screenshot.string()) + " " +
      testing::shell_quote("file://" + (dir / "out/report.html").string()));
  ASSERT_EQ(rendered.exit_code, 0) << rendered.output;
  ASSERT_TRUE(fs::exists(screenshot)) << rendered.output;
  if (const char* keep = std::getenv("TP_KEEP_INTERPRETATION_SCREENSHOT")) {
    fs::copy_file(screenshot, keep, fs::copy_options::overwrite_existing);
  }
  std::ifstream png_file(screenshot, std::ios::binary);
  std::stringstream png;
  png << png_file.rdbuf();
  const data::Image page = data::decode_image(png.str(), screenshot.string(), 3);
  // The diagonal of the heat map is dark blue (rows mostly right); the thumbnails bring the shapes' colours:
  // pixels neither white, grey nor one of the report's few colours.
  std::size_t dark_blue = 0, colourful = 0;
  for (std::size_t i = 0; i + 2 < page.pixels.size(); i += 3) {
    const int r = page.pixels[i], g = page.pixels[i + 1], b = page.pixels[i + 2];
    if (std::abs(r - 0x3a) + std::abs(g - 0x88) + std::abs(b - 0xbf) < 60 && b > r + 60) ++dark_blue;
    if (std::max({r, g, b}) - std::min({r, g, b}) > 60) ++colourful;
  }
  EXPECT_GT(dark_blue, 1500u) << "the confusion matrix's diagonal";
  EXPECT_GT(colourful, 20000u) << "the thumbnails";
}

// Two ranks validate disjoint shares: the matrix counts each of the 61 validation samples (an odd number: a
// padded sampler would count one twice) exactly once, and every top-loss thumbnail made by either rank arrives.
TEST(Interpretation, OnTwoRanksEveryValidationSampleIsCountedOnce) {
  testing::TempDir dir;
  shapes_with_mislabelled_circles(dir / "data", 20, 4);
  fs::remove(files_in(dir / "data/valid/triangle").front());  // 59 validation images
  spec::Spec spec = shapes_spec(dir / "data", 12);
  spec.train.epochs = 2;
  testing::on_ranks(2, [&](dist::Communicator& communicator) {
    const data::Datasets data = data::open(spec.data, dir.path(), spec.job.seed);
    auto model = model::create(spec.model, data.schema, ".", spec.job.seed);
    fit(model, data, spec, communicator, dir / "out", kOrigin);
  });
  const json interpretation = read_json(dir / "out/interpretation.json");
  EXPECT_EQ(interpretation["samples"], 59);
  std::int64_t total = 0;
  for (const json& row : interpretation["confusion_matrix"]) {
    for (const json& count : row) total += count.get<std::int64_t>();
  }
  EXPECT_EQ(total, 59);
  std::set<std::string> names;
  for (const json& p : interpretation["predictions"]) names.insert(p["sample"].get<std::string>());
  EXPECT_EQ(names.size(), 59u) << "each sample once";
  std::int64_t support = 0;
  for (const json& c : interpretation["per_class"]) support += c["support"].get<std::int64_t>();
  EXPECT_EQ(support, 59);
  ASSERT_EQ(interpretation["top_losses"].size(), 12u);
  for (const json& t : interpretation["top_losses"]) EXPECT_TRUE(t.contains("thumbnail")) << t["sample"];
  expect_epoch_f1_as_sklearn(read_lines(dir / "out/metrics.jsonl").back(), interpretation,
                             scikit_learns_scores(dir / "out/interpretation.json"));
}

// A regression: every validation sample's prediction, residual = actual - predicted, and the scatter plots.
TEST(Interpretation, RegressionGivesPredictedAgainstActualAndTheResiduals) {
  testing::TempDir dir;
  torch::manual_seed(4);
  const auto inputs = torch::randn({200, 4});
  const auto targets = inputs.matmul(torch::tensor({1.0F, -2.0F, 0.5F, 3.0F})) + 0.1 * torch::randn({200});
  std::vector<std::string> names;
  for (int i = 0; i < 200; ++i) names.push_back("rows.csv:" + std::to_string(i + 2));
  auto all = std::make_shared<data::TensorDataset>(inputs, targets, names);
  const auto [train_indices, valid_indices] = data::split_indices(200, 0.25, 4);
  data::Datasets data;
  data.train = std::make_shared<data::SubsetDataset>(all, train_indices);
  data.valid = std::make_shared<data::SubsetDataset>(all, valid_indices);
  data.bad_files = std::make_shared<data::BadFiles>(10);
  data.schema.input_shape = {4};
  data.schema.num_outputs = 1;
  data.schema.classification = false;
  spec::Spec spec = spec::load_string("[data]\nsource = \"unused\"\nformat = \"table_csv\"\n[model]\narch = \"mlp\"\n"
                                      "[train]\nepochs = 3\nbatch_size = 16\nlr = 0.01\n[checkpoint]\nevery_epochs = 0\n",
                                      {}, "test")
                        .spec;
  auto model = model::create(spec.model, data.schema, ".", 1);
  auto single = dist::single_process();
  const FitResult result = fit(model, data, spec, *single, dir / "out", kOrigin);
  const json interpretation = read_json(dir / "out/interpretation.json");
  EXPECT_EQ(interpretation["task"], "regression");
  EXPECT_EQ(interpretation["samples"], 50);
  EXPECT_NEAR(interpretation["mae"].get<double>(), result.last.mae, 1e-5);
  ASSERT_EQ(interpretation["points"].size(), 50u);
  for (const json& p : interpretation["points"]) {
    EXPECT_DOUBLE_EQ(p["residual"].get<double>(), p["actual"].get<double>() - p["predicted"].get<double>());
    EXPECT_EQ(p["sample"].get<std::string>().rfind("rows.csv:", 0), 0u);
  }
  EXPECT_FALSE(read_lines(dir / "out/metrics.jsonl").back().contains("per_class"));
  EXPECT_TRUE(read_lines(dir / "out/metrics.jsonl").back()["f1"].is_null()) << "no F1 for a regression";
  std::ifstream report_file(dir / "out/report.html");
  std::stringstream report;
  report << report_file.rdbuf();
  EXPECT_NE(report.str().find("Predicted against actual"), std::string::npos);
  EXPECT_NE(report.str().find("Residuals (actual - predicted)"), std::string::npos);
}

// The parts without training: ties, a class never predicted (precision 0 as scikit-learn's zero_division=0),
// the packing for the gather, and regression points spread over many samples.
TEST(Interpretation, ScoresTiesAndPackingFollowTheirDefinitions) {
  const std::vector<ClassifiedSample> samples = {
      {"b.png", 0, 0, 0.1, ""}, {"a.png", 0, 1, 2.0, "jpeg"}, {"c.png", 1, 1, 0.2, ""},
      {"d.png", 2, 1, 2.0, ""}, {"e.png", 2, 0, 1.5, ""}};
  const std::vector<ClassifiedSample> unpacked =
      unpack_classified({pack(samples), pack(std::vector<ClassifiedSample>{})});
  ASSERT_EQ(unpacked.size(), samples.size());
  EXPECT_EQ(unpacked[1].thumbnail, "jpeg");
  EXPECT_EQ(unpacked[3].name, "d.png");
  const std::optional<Interpretation> result =
      interpret_classification(unpacked, {"x", "y", "z"}, 3, {2, 10});
  const auto& classification = std::get<ClassificationInterpretation>(result->task);
  EXPECT_EQ(classification.confusion_matrix,
            (std::vector<std::vector<std::int64_t>>{{1, 1, 0}, {0, 1, 0}, {1, 1, 0}}));
  EXPECT_EQ(classification.per_class[2].precision, 0.0) << "z is never predicted";
  EXPECT_EQ(classification.per_class[2].f1, 0.0);
  EXPECT_DOUBLE_EQ(classification.per_class[1].precision, 1.0 / 3);
  EXPECT_DOUBLE_EQ(classification.per_class[0].f1, 0.5);
  EXPECT_EQ(classification.top_losses[0].sample, "a.png") << "equal losses by name";
  EXPECT_EQ(classification.top_losses[1].sample, "d.png");
  EXPECT_EQ(classification.top_losses[2].sample, "e.png");
  EXPECT_EQ(classification.top_losses[0].thumbnail, "data:image/jpeg;base64," + base64("jpeg"));
  EXPECT_TRUE(classification.top_losses[1].thumbnail.empty());
  EXPECT_FALSE(to_json(*result)["top_losses"][1].contains("thumbnail"));
  EXPECT_EQ(classification.most_confused.size(), 3u);
  EXPECT_EQ(classification.predictions[0].name, "a.png") << "sorted by name";
  EXPECT_EQ(per_class_values(result).size(), 9u);
  EXPECT_EQ(per_class_values(result)[0].first, "interpretation/precision/x");
  EXPECT_EQ(per_class_scores(result)["z"]["support"], 2);

  std::vector<RegressedSample> many;
  for (int i = 0; i < 5000; ++i) many.push_back({fmt::format("{:05d}", i), i * 1.0, i * 1.0 + 1});
  const std::optional<Interpretation> regression =
      interpret_regression(unpack_regressed({pack(many)}), 2000, {1, 1});
  EXPECT_EQ(regression->samples, 5000u);
  const auto& regressed = std::get<RegressionInterpretation>(regression->task);
  ASSERT_EQ(regressed.points.size(), 2000u);
  EXPECT_EQ(regressed.points[1].name, "00002") << "evenly spread";
  EXPECT_DOUBLE_EQ(regressed.mae, 1.0);
  EXPECT_TRUE(per_class_scores(regression).is_null());
  EXPECT_TRUE(per_class_values(regression).empty());
  EXPECT_TRUE(per_class_scores(std::nullopt).is_null());
}

// A class name goes into the sinks' names as it is: the MLflow sink makes it a name MLflow takes.
TEST(Interpretation, PerClassValuesNameTheClassAsItIs) {
  const std::optional<Interpretation> result =
      interpret_classification({{"a.png", 0, 1, 1.0, ""}, {"b.png", 1, 1, 0.5, ""}}, {"ä+b", "c"}, 1, {1, 1});
  EXPECT_EQ(per_class_values(result)[0].first, "interpretation/precision/ä+b");
  EXPECT_EQ(per_class_scores(result)["ä+b"]["recall"], 0.0);
}

// interpretation.json's fields are those docs/training.md's table lists, with the values they had when
// interpret_* built the JSON by key.
TEST(Interpretation, JsonHasTheDocumentedFields) {
  const auto keys = [](const json& object) {
    std::set<std::string> names;
    for (const auto& [key, value] : object.items()) names.insert(key);
    return names;
  };
  const std::vector<ClassifiedSample> samples = {
      {"b.png", 0, 0, NAN, ""}, {"a.png", 0, 1, 2.0, "jpeg"}, {"c.png", 1, 1, 0.2, ""}};
  const json classification = to_json(interpret_classification(samples, {"x", "y"}, 1, {3, 12}));
  EXPECT_EQ(keys(classification),
            (std::set<std::string>{"task", "epoch", "step", "samples", "accuracy", "classes",
                                   "confusion_matrix", "confusion_matrix_normalized", "per_class",
                                   "most_confused", "top_losses", "predictions"}));
  EXPECT_EQ(classification["task"], "classification");
  EXPECT_EQ(classification["epoch"], 3);
  EXPECT_EQ(classification["step"], 12);
  EXPECT_EQ(classification["samples"], 3);
  EXPECT_DOUBLE_EQ(classification["accuracy"].get<double>(), 2.0 / 3);
  EXPECT_EQ(classification["classes"], json::array({"x", "y"}));
  EXPECT_EQ(classification["confusion_matrix"], json::parse("[[1,1],[0,1]]"));
  EXPECT_EQ(classification["confusion_matrix_normalized"], json::parse("[[0.5,0.5],[0.0,1.0]]"));
  EXPECT_EQ(keys(classification["per_class"][0]),
            (std::set<std::string>{"class", "precision", "recall", "f1", "support"}));
  EXPECT_EQ(classification["per_class"][1]["class"], "y");
  EXPECT_EQ(classification["per_class"][1]["support"], 1);
  EXPECT_EQ(classification["most_confused"], json::parse(R"([{"actual":"x","predicted":"y","count":1}])"));
  EXPECT_EQ(classification["top_losses"],
            json::parse(R"([{"sample":"a.png","actual":"x","predicted":"y","loss":2.0,)"
                        R"("thumbnail":"data:image/jpeg;base64,)" + base64("jpeg") + "\"}]"));
  EXPECT_EQ(classification["predictions"][0],
            json::parse(R"({"sample":"a.png","actual":0,"predicted":1,"loss":2.0})"));
  EXPECT_TRUE(classification["predictions"][1]["loss"].is_null()) << "a NaN loss";

  const json regression = to_json(interpret_regression({{"r:2", 1.0, 3.0}, {"r:1", 2.0, 2.0}}, 10, {1, 5}));
  EXPECT_EQ(keys(regression),
            (std::set<std::string>{"task", "epoch", "step", "samples", "mae", "rmse", "points"}));
  EXPECT_EQ(regression["task"], "regression");
  EXPECT_EQ(regression["samples"], 2);
  EXPECT_DOUBLE_EQ(regression["mae"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(regression["rmse"].get<double>(), std::sqrt(2.0));
  EXPECT_EQ(regression["points"][0],
            json::parse(R"({"sample":"r:1","actual":2.0,"predicted":2.0,"residual":0.0})"));
  EXPECT_EQ(regression["points"][1]["residual"], -2.0);
  EXPECT_TRUE(to_json(interpret_regression({}, 10, {1, 5}))["mae"].is_null()) << "no samples";
}

}  // namespace
}  // namespace tp::train
