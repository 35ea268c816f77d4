// Real 2-rank trainpoint runs whose records reach the tools people look at, checked with the real tools from
// PyPI (scripts/install-python-tools). TensorBoard (2.21): the event files read back by the tensorboard package,
// every tag and step, each value equal to metrics.jsonl's or steps.jsonl's, the hparams plugin's settings and
// end; a restart that repeats steps without duplicates; an s3:// output; a TensorBoard server on loopback
// answering its data API and rendered by Chromium; a sink that cannot write costs one warning. MLflow (3.17): a
// real tracking server on loopback read back through MLflow's client: params, metric histories, tags,
// artifacts, status; a restart that continues the same MLflow run, also with two outputs of the same settings; a
// run given by MLFLOW_RUN_ID; a server that is down or answers HTTP 500; command mode, which sends nothing; the
// run's charts in MLflow's UI, rendered by Chromium.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <nlohmann/json.hpp>
#include <png.h>
#include <set>
#include <stdexcept>
#include <thread>
#include <unistd.h>

#include "support/background_process.h"
#include "support/fault_proxy.h"
#include "support/http.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "s3/s3_server.h"
#include "telemetry/mlflow.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::run_checked;
using testing::shell_quote;

// Tag -> step -> value, as TensorBoard should show them.
using Curves = std::map<std::string, std::map<std::int64_t, double>>;

std::vector<json> json_lines(const fs::path& file) {
  std::vector<json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

// What steps.jsonl and metrics.jsonl say TensorBoard should show (runtime/train/metrics.h, step_values and
// epoch_values), null metrics left out; the throughput is checked apart (it is in no .jsonl).
Curves expected_curves(const fs::path& output) {
  Curves curves;
  auto add = [&](const std::string& tag, std::int64_t step, const json& value) {
    if (!value.is_null()) curves[tag][step] = value.get<double>();
  };
  for (const json& step : json_lines(output / "steps.jsonl")) {
    const std::int64_t at = step["step"];
    add("train/loss", at, step["train_loss"]);
    add("train/lr", at, step["lr"]);
    add("step_time/step_s", at, step["step_s"]);
    for (const char* part : {"data_wait", "forward_backward", "allreduce", "optimizer", "checkpoint"}) {
      add(std::string("step_time/") + part + "_s", at, step[std::string(part) + "_s"]);
    }
  }
  for (const json& epoch : json_lines(output / "metrics.jsonl")) {
    const std::int64_t at = epoch["step"];
    add("train/epoch_loss", at, epoch["train_loss"]);
    add("epoch/epoch", at, epoch["epoch"]);
    add("epoch/seconds", at, epoch["seconds"]);
    add("epoch/lr", at, epoch["lr"]);
    add("valid/loss", at, epoch["valid_loss"]);
    add("valid/accuracy", at, epoch["accuracy"]);
    add("valid/error_rate", at, epoch["error_rate"]);
    add("valid/top_k_accuracy", at, epoch["top_k_accuracy"]);
    add("valid/mae", at, epoch["mae"]);
    add("valid/mse", at, epoch["mse"]);
    add("valid/f1", at, epoch["f1"]);
    const json class_f1 = epoch.value("class_f1", json::object());  // items() must not outlive it
    for (const auto& [name, value] : class_f1.items()) add("valid/f1/" + name, at, value);
    // The last epoch's per-class scores (train/interpretation.h).
    const json per_class = epoch.value("per_class", json::object());  // items() must not outlive it
    for (const auto& [name, scores] : per_class.items()) {
      for (const char* score : {"precision", "recall", "f1"}) add("interpretation/" + std::string(score) + "/" + name, at, scores[score]);
    }
  }
  return curves;
}

// A PNG file's pixels, 3 bytes each.
struct Rgb {
  png_uint_32 width = 0, height = 0;
  std::vector<unsigned char> pixels;
};

Rgb read_png(const fs::path& file) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, file.c_str())) throw std::runtime_error(image.message);
  image.format = PNG_FORMAT_RGB;
  Rgb rgb{image.width, image.height, std::vector<unsigned char>(PNG_IMAGE_SIZE(image))};
  if (!png_image_finish_read(&image, nullptr, rgb.pixels.data(), 0, nullptr)) throw std::runtime_error(image.message);
  return rgb;
}

// The pixels of a PNG file near a colour (anti-aliasing blends the edges of lines), below `top` (TensorBoard's
// header bar is orange too).
std::size_t pixels_near(const fs::path& file, int r, int g, int b, png_uint_32 top) {
  const Rgb image = read_png(file);
  const std::vector<unsigned char>& rgb = image.pixels;
  std::size_t n = 0;
  for (std::size_t i = std::size_t{top} * image.width * 3; i + 2 < rgb.size(); i += 3) {
    if (std::abs(rgb[i] - r) + std::abs(rgb[i + 1] - g) + std::abs(rgb[i + 2] - b) < 30) ++n;
  }
  return n;
}

// The strongly coloured pixels (not white, grey or black) of a PNG file in the rectangle [left, right) x [top,
// bottom): lines drawn in a run's colour, where a chart still loading shows none.
std::size_t coloured_pixels(const Rgb& image, png_uint_32 left, png_uint_32 top, png_uint_32 right, png_uint_32 bottom) {
  std::size_t n = 0;
  for (png_uint_32 y = top; y < std::min(bottom, image.height); ++y) {
    for (png_uint_32 x = left; x < std::min(right, image.width); ++x) {
      const unsigned char* p = &image.pixels[(std::size_t{y} * image.width + x) * 3];
      if (std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]}) > 80) ++n;
    }
  }
  return n;
}

// Writes the columns [0, width) of `image` to `file`.
void write_left_of(const Rgb& image, png_uint_32 width, const fs::path& file) {
  png_image out{};
  out.version = PNG_IMAGE_VERSION;
  out.format = PNG_FORMAT_RGB;
  out.width = std::min(width, image.width);
  out.height = image.height;
  if (!png_image_write_to_file(&out, file.c_str(), 0, image.pixels.data(),
                               static_cast<png_int_32>(image.width * 3), nullptr)) {
    throw std::runtime_error(std::string("writing ") + file.string() + ": " + out.message);
  }
}

// A git repository of generated images and a spec for a short image classification run: 2 classes of 40
// 16x16 images, 64 to train: 4 steps per epoch on each of 2 ranks.
class TensorBoardRun : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = testing::tools_python();
    ASSERT_EQ(::access(python_.c_str(), X_OK), 0)
        << python_ << " is missing: the tensorboard package's python comes from scripts/install-python-tools "
        << "(scripts/test runs it), or set TRAINPOINT_PYTHON_TOOLS to a python3 that has tensorboard 2.21";
    repo_ = dir_ / "repo";
    run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote((repo_ / "data").string()) +
                " --classes 2 --per-class 40 --size 16 --format png --seed 5");
    testing::write_text(repo_ / "train.toml", R"([job]
name = "boarded"
output = "out"

[data]
source = "data"
image_size = 16
valid = 0.2
workers = 1

[model]
arch = "small_cnn"

[train]
epochs = 2
batch_size = 8
)");
    const std::string git = "git -C " + shell_quote(repo_.string()) + " -c user.name=t -c user.email=t@example.invalid ";
    run_checked("git init -q -b main " + shell_quote(repo_.string()));
    run_checked(git + "add -A && " + git + "commit -q -m data");
  }

  testing::CommandResult train(const std::string& extra = "", const std::string& environment = "",
                               const std::string& workdir = "work") const {
    return testing::run_command(environment + "MASTER_PORT=" + std::to_string(testing::free_port()) + " " +
                                testing::trainpoint_binary() + " run --repo " + shell_quote(repo_.string()) +
                                " --ref main --spec train.toml --set dist.nproc_per_node=2 --workdir " +
                                shell_quote((dir_ / workdir).string()) + " " + extra + " 2>&1");
  }

  // What the tensorboard package reads in `logdir` (default: the run's tensorboard/) (read_events.py).
  json read_back(const fs::path& logdir = {}) const {
    const std::string output = run_checked(shell_quote(python_) + " " +
                                           shell_quote(testing::source_dir() + "/tests/telemetry/read_events.py") +
                                           " " + shell_quote((logdir.empty() ? tensorboard_dir() : logdir).string()));
    // Its last line; TensorBoard's own notes (such as the steps a restart purged) come before it.
    std::string last = output;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
    json read = json::parse(last, nullptr, /*allow_exceptions=*/false);
    if (read.is_discarded()) throw std::runtime_error("read_events.py printed no JSON: " + output);
    return read;
  }

  fs::path output_dir() const { return dir_ / "work/out"; }
  fs::path tensorboard_dir() const { return output_dir() / "tensorboard"; }

  // Every curve TensorBoard shows is the one the .jsonl files give: the same tags, each step once, each value
  // the record's as a float (TensorBoard's simple_value); and the throughput at each epoch's step.
  void expect_curves_of_the_records(const json& read) const {
    const Curves expected = expected_curves(output_dir());
    std::set<std::string> expected_tags{"throughput/images_per_s"}, read_tags;
    for (const auto& [tag, points] : expected) expected_tags.insert(tag);
    for (const auto& [tag, points] : read["scalars"].items()) read_tags.insert(tag);
    EXPECT_EQ(read_tags, expected_tags) << read.dump();
    for (const auto& [tag, points] : expected) {
      if (!read["scalars"].contains(tag)) continue;
      std::vector<std::int64_t> steps, expected_steps;
      for (const auto& [step, value] : points) expected_steps.push_back(step);
      for (const json& point : read["scalars"][tag]) {
        const std::int64_t step = point[0];
        steps.push_back(step);
        const auto at = points.find(step);
        if (at == points.end()) continue;
        EXPECT_EQ(point[1].get<double>(), static_cast<double>(static_cast<float>(at->second)))
            << tag << " at step " << step << ": TensorBoard shows " << point[1] << ", the record says " << at->second;
      }
      EXPECT_EQ(steps, expected_steps) << tag << ": each step once, in order";
    }
    std::vector<std::int64_t> epoch_steps, throughput_steps;
    for (const json& epoch : json_lines(output_dir() / "metrics.jsonl")) epoch_steps.push_back(epoch["step"]);
    for (const json& point : read["scalars"]["throughput/images_per_s"]) {
      throughput_steps.push_back(point[0]);
      EXPECT_GT(point[1].get<double>(), 0) << read.dump();
    }
    EXPECT_EQ(throughput_steps, epoch_steps);
  }

  testing::TempDir dir_;
  fs::path repo_;
  std::string python_;
};

TEST_F(TensorBoardRun, TensorBoardReadsEveryStepAndEpochWithTheRecordsValuesAndTheRunsSettings) {
  const auto result = train();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find("TensorBoard:"), std::string::npos) << "no warning: " << result.output;
  const json read = read_back();
  ASSERT_EQ(read["files"].size(), 1u) << read.dump();
  EXPECT_EQ(read["files"][0].get<std::string>().rfind("events.out.tfevents.", 0), 0u) << read.dump();
  expect_curves_of_the_records(read);
  // 2 epochs of 4 steps; the validation of a 2-class problem: loss, accuracy and error rate (no top-5, no MAE).
  EXPECT_EQ(read["scalars"]["train/loss"].size(), 8u) << read.dump();
  EXPECT_EQ(read["scalars"]["valid/accuracy"].size(), 2u) << read.dump();
  EXPECT_EQ(read["scalars"].count("valid/mae"), 0u) << read.dump();

  // The hparams plugin: the settings that make the run, and its successful end.
  const json& hparams = read["hparams"];
  EXPECT_EQ(hparams["train.lr"], 0.001) << hparams.dump();
  EXPECT_EQ(hparams["train.optimizer"], "adamw") << hparams.dump();
  EXPECT_EQ(hparams["train.batch_size"], 8) << hparams.dump();
  EXPECT_EQ(hparams["model.arch"], "small_cnn") << hparams.dump();
  EXPECT_EQ(hparams["data.drop_last"], false) << hparams.dump();
  EXPECT_EQ(hparams["train.epochs"], 2) << hparams.dump();
  EXPECT_EQ(hparams["world_size"], 2) << hparams.dump();
  EXPECT_EQ(read["end_status"], "STATUS_SUCCESS") << read.dump();
  // How it came out, in the Text tab.
  EXPECT_EQ(read["outcome"], "trained 2 of 2 epochs") << read.dump();
}

// Early stopping's verdict and keep_best's model, as TensorBoard's Text tab shows them (and as run.json has them).
TEST_F(TensorBoardRun, AnEarlyStopAndTheKeptBestModelAreTheRunsOutcome) {
  const auto result = train("--set train.epochs=6 --set train.early_stop.patience=1 "
                            "--set train.early_stop.min_delta=10 --set checkpoint.keep_best=valid_loss");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const json read = read_back();
  const std::string outcome = read["outcome"].is_string() ? read["outcome"].get<std::string>() : read.dump();
  EXPECT_EQ(outcome.rfind("stopped at epoch 2: valid_loss ", 0), 0u) << outcome;
  EXPECT_NE(outcome.find(" did not improve by 10 for 1 epoch; best "), std::string::npos) << outcome;
  EXPECT_TRUE(std::regex_search(outcome, std::regex("; model\\.pt is epoch [12]'s, the best valid_loss \\([0-9.e-]+\\)$")))
      << outcome;
}

TEST_F(TensorBoardRun, ARestartThatRepeatsStepsShowsEachStepOnceWithTheRecordsValues) {
  ASSERT_EQ(train().exit_code, 0);
  // The last epoch's checkpoint lost: the restart resumes after epoch 1 (step 4) and trains steps 5-8 again,
  // into a new event file, while the first file still holds its own steps 5-8.
  std::vector<fs::path> checkpoints;
  for (const auto& entry : fs::recursive_directory_iterator(output_dir() / "checkpoints")) {
    if (entry.path().extension() == ".ckpt") checkpoints.push_back(entry.path());
  }
  ASSERT_EQ(checkpoints.size(), 2u);
  std::sort(checkpoints.begin(), checkpoints.end());
  fs::remove(checkpoints.back());
  fs::remove(output_dir() / "model.pt");
  fs::remove(output_dir() / "run.json");

  const auto result = train();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  ASSERT_NE(result.output.find("resumed from"), std::string::npos) << result.output;
  const json read = read_back();
  EXPECT_EQ(read["files"].size(), 2u) << "one file per start: " << read.dump();
  expect_curves_of_the_records(read);
  EXPECT_EQ(read["scalars"]["train/loss"].size(), 8u) << read.dump();
}

TEST_F(TensorBoardRun, AnS3OutputGetsTheEventFilesOfEachPodAndTheCurvesGoOnAcrossPods) {
  testing::S3Server server;
  const std::string s3_env = "AWS_ENDPOINT_URL=" + server.endpoint() +
                             " " + testing::S3Server::key_environment() + " ";
  const auto pod = [&](const std::string& workdir, int epochs) {
    return testing::run_command(s3_env + "MASTER_PORT=" + std::to_string(testing::free_port()) + " " +
                                testing::trainpoint_binary() + " run --repo " + shell_quote(repo_.string()) +
                                " --ref main --spec train.toml --set dist.nproc_per_node=2" +
                                " --set job.output=s3://test-bucket/runs/tb --set train.epochs=" +
                                std::to_string(epochs) + " --workdir " + shell_quote((dir_ / workdir).string()));
  };
  const auto fetch = [&](const std::string& prefix, const fs::path& to) {
    run_checked(s3_env + testing::trainpoint_binary() + " s3 cp " + (prefix.find('.') == std::string::npos ? "--recursive " : "") +
                "s3://test-bucket/runs/tb/" + prefix +
                " " + shell_quote(to.string()));
  };
  const auto first = pod("pod-1", 1);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // A new pod, nothing on its disk: it resumes from the output's checkpoint and trains epoch 2.
  const auto second = pod("pod-2", 2);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  ASSERT_NE(second.output.find("resumed from"), std::string::npos) << second.output;

  fetch("tensorboard", dir_ / "fetched/tensorboard");
  fetch("steps.jsonl", dir_ / "fetched/steps.jsonl");
  const json read = read_back(dir_ / "fetched/tensorboard");
  EXPECT_EQ(read["files"].size(), 2u) << "each pod's file is in the output: " << read.dump();
  std::vector<std::int64_t> steps, expected_steps;
  std::map<std::int64_t, double> losses;
  for (const json& step : json_lines(dir_ / "fetched/steps.jsonl")) {
    expected_steps.push_back(step["step"]);
    losses[step["step"]] = step["train_loss"];
  }
  for (const json& point : read["scalars"]["train/loss"]) {
    const std::int64_t step = point[0];
    steps.push_back(step);
    ASSERT_EQ(losses.count(step), 1u) << point;
    EXPECT_EQ(point[1].get<double>(), static_cast<double>(static_cast<float>(losses.at(step)))) << point;
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6, 7, 8})) << read.dump();
  EXPECT_EQ(steps, expected_steps);
  EXPECT_EQ(read["scalars"]["valid/loss"].size(), 2u) << read.dump();
  EXPECT_EQ(read["end_status"], "STATUS_SUCCESS") << read.dump();
}

TEST_F(TensorBoardRun, ATensorBoardServerOnLoopbackServesTheRunAndChromiumDrawsItsCurves) {
  ASSERT_EQ(train("--set train.epochs=5").exit_code, 0);
  const int port = testing::free_port();
  testing::BackgroundProcess server(shell_quote(python_) + " -m tensorboard.main --logdir " +
                                        shell_quote(tensorboard_dir().string()) +
                                        " --host 127.0.0.1 --port " + std::to_string(port) + " --load_fast=false",
                                    dir_ / "tensorboard.log");
  testing::wait_for_port(port, 60s);
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  // TensorBoard loads the files in the background after it starts serving: ask until the run is there.
  json tags;
  for (int i = 0; i < 300; ++i) {
    const auto response = testing::http_get(base + "/data/plugin/scalars/tags");
    if (response.status == 200) tags = json::parse(response.body);
    if (tags.contains(".") && tags["."].contains("valid/loss")) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(tags.contains(".")) << tags.dump() << "\n" << server.log();
  for (const char* tag : {"train/loss", "train/lr", "train/epoch_loss", "valid/loss", "valid/accuracy",
                          "throughput/images_per_s", "step_time/step_s", "step_time/data_wait_s"}) {
    EXPECT_TRUE(tags["."].contains(tag)) << tag << ": " << tags.dump();
  }
  const auto scalars = testing::http_get(base + "/data/plugin/scalars/scalars?run=.&tag=train%2Floss");
  ASSERT_EQ(scalars.status, 200) << scalars.body;
  const json points = json::parse(scalars.body);  // [[wall_time, step, value], ...]
  ASSERT_EQ(points.size(), 20u) << points.dump();
  EXPECT_EQ(points.back()[1], 20) << points.dump();

  // The scalars page in Chromium: the loss curves drawn in the run's colour (TensorBoard's first, #ff7043).
  ASSERT_EQ(testing::run_command("command -v chromium").exit_code, 0)
      << "chromium is not installed: scripts/install-deps --tests installs it (scripts/deps/debian-test.txt)";
  const fs::path screenshot = dir_ / "tensorboard.png";
  const auto shot = testing::run_command(
      "timeout 120 chromium --headless --no-sandbox --enable-unsafe-swiftshader --disable-dev-shm-usage "
      "--hide-scrollbars --user-data-dir=" + shell_quote((dir_ / "profile").string()) +
      " --window-size=1600,1100 --virtual-time-budget=30000 --screenshot=" + shell_quote(screenshot.string()) + " " +
      shell_quote(base + "/?darkMode=false#scalars&tagFilter=loss&_smoothingWeight=0"));
  ASSERT_EQ(shot.exit_code, 0) << shot.output;
  ASSERT_TRUE(fs::exists(screenshot)) << shot.output;
  if (const char* keep = std::getenv("TP_KEEP_TENSORBOARD_SCREENSHOT"))
    fs::copy_file(screenshot, keep, fs::copy_options::overwrite_existing);
  EXPECT_GT(pixels_near(screenshot, 0xff, 0x70, 0x43, 80), 1000u) << "the curves were drawn";
}

// An MLflow tracking server on loopback: sqlite backend, artifacts proxied into a folder.
class MlflowServer {
 public:
  MlflowServer(const std::string& python, const fs::path& dir)
      : port_(testing::free_port()),
        process_(shell_quote(python) + " -m mlflow server --backend-store-uri " +
                     shell_quote("sqlite:///" + (dir / "mlflow.db").string()) + " --artifacts-destination " +
                     shell_quote((dir / "mlflow-artifacts").string()) + " --host 127.0.0.1 --port " +
                     std::to_string(port_) + " --workers 1",
                 dir / "mlflow.log") {
    testing::wait_for_port(port_, 120s);
    for (int i = 0; i < 600 && testing::http_get(uri() + "/health").status != 200; ++i) std::this_thread::sleep_for(100ms);
  }
  std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::string log() const { return process_.log(); }

 private:
  int port_;
  testing::BackgroundProcess process_;
};

class MlflowRun : public TensorBoardRun {
 protected:
  // The experiment's runs as MLflow's client reads them (read_mlflow.py), oldest first.
  json runs(const MlflowServer& server, const std::string& experiment) const {
    const std::string output = run_checked(shell_quote(python_) + " " +
                                           shell_quote(testing::source_dir() + "/tests/telemetry/read_mlflow.py") +
                                           " " + server.uri() + " " + shell_quote(experiment));
    std::string last = output;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
    json read = json::parse(last, nullptr, /*allow_exceptions=*/false);
    if (read.is_discarded()) throw std::runtime_error("read_mlflow.py printed no JSON: " + output);
    return read;
  }

  // Every metric history of `run` is the curve the .jsonl files of `output` give, each step once.
  void expect_metrics_of_the_records(const json& run, const fs::path& output = {}) const {
    const Curves expected = expected_curves(output.empty() ? output_dir() : output);
    for (const auto& [tag, points] : expected) {
      ASSERT_TRUE(run["metrics"].contains(tag)) << tag << ": " << run["metrics"].dump();
      std::vector<std::int64_t> steps, expected_steps;
      for (const auto& [step, value] : points) expected_steps.push_back(step);
      for (const json& point : run["metrics"][tag]) {
        const std::int64_t step = point[0];
        steps.push_back(step);
        if (points.count(step)) {
          EXPECT_EQ(point[1].get<double>(), points.at(step)) << tag << " at step " << step;
        }
      }
      EXPECT_EQ(steps, expected_steps) << tag;
    }
  }
};

TEST_F(MlflowRun, ARunIsLoggedWithItsParamsMetricsTagsArtifactsAndEndAndARestartContinuesIt) {
  MlflowServer server(python_, dir_.path());
  const std::string environment = "MLFLOW_EXPERIMENT_NAME=trainpoint-test ";
  const auto first = train("--set train.epochs=1 --set log.mlflow_uri=" + server.uri(), environment);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("MLflow"), std::string::npos) << "no warning: " << first.output;
  json read = runs(server, "trainpoint-test");
  ASSERT_EQ(read.size(), 1u) << read.dump();
  EXPECT_EQ(read[0]["status"], "FINISHED") << read.dump();
  EXPECT_EQ(read[0]["name"], "boarded");
  EXPECT_EQ(read[0]["params"]["train.lr"], "0.001") << read[0]["params"].dump();
  EXPECT_EQ(read[0]["params"]["train.optimizer"], "adamw");
  EXPECT_EQ(read[0]["params"]["model.arch"], "small_cnn");
  EXPECT_EQ(read[0]["params"]["world_size"], "2");
  const std::string commit = run_checked("git -C " + shell_quote(repo_.string()) + " rev-parse HEAD");
  EXPECT_EQ(read[0]["tags"]["mlflow.source.git.commit"], commit.substr(0, 40)) << read[0]["tags"].dump();
  EXPECT_EQ(read[0]["tags"]["mlflow.source.git.repoURL"], repo_.string()) << read[0]["tags"].dump();
  EXPECT_EQ(read[0]["tags"]["trainpoint.run_key"].get<std::string>().size(), 12u) << read[0]["tags"].dump();
  EXPECT_EQ(read[0]["tags"]["trainpoint.outcome"], "trained 1 of 1 epochs") << read[0]["tags"].dump();
  EXPECT_EQ(read[0]["artifacts"], (json{"interpretation.json", "metrics.jsonl", "model.pt", "report.html"}))
      << read[0].dump();
  expect_metrics_of_the_records(read[0]);

  // One more epoch: the restart resumes from the checkpoint and continues the same MLflow run.
  const auto second = train("--set train.epochs=2 --set log.mlflow_uri=" + server.uri(), environment);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  ASSERT_NE(second.output.find("resumed from"), std::string::npos) << second.output;
  read = runs(server, "trainpoint-test");
  ASSERT_EQ(read.size(), 1u) << "the same run: " << read.dump();
  EXPECT_EQ(read[0]["status"], "FINISHED");
  expect_metrics_of_the_records(read[0]);
  EXPECT_EQ(read[0]["metrics"]["train/loss"].size(), 8u) << read[0]["metrics"].dump();
  EXPECT_EQ(read[0]["tags"]["trainpoint.outcome"], "trained 2 of 2 epochs") << read[0]["tags"].dump();
}

TEST_F(MlflowRun, AServerThatIsDownOrFailsIsOneWarningAndAFinishedJob) {
  // Nothing listens on the port.
  const auto down = train("--set train.epochs=1", "MLFLOW_TRACKING_URI=http://127.0.0.1:" +
                                                      std::to_string(testing::free_port()) + " ");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  EXPECT_TRUE(fs::exists(output_dir() / "model.pt"));
  std::size_t warnings = 0;
  for (auto at = down.output.find("MLflow (http://127.0.0.1:"); at != std::string::npos;
       at = down.output.find("MLflow (http://127.0.0.1:", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << down.output;
  EXPECT_NE(down.output.find("it gets no more records of this run (training goes on)"), std::string::npos)
      << down.output;

  // A server that answers every request with HTTP 500 and an error (failing_mlflow_server.py): the call is
  // tried as the retry policy says (8 attempts), then the one warning names the call, the status and the
  // server's message; the sink asks nothing more.
  const int port = testing::free_port();
  testing::BackgroundProcess failing(shell_quote(python_) + " " +
                                         shell_quote(testing::source_dir() + "/tests/telemetry/failing_mlflow_server.py") +
                                         " " + std::to_string(port),
                                     dir_ / "failing.log");
  testing::wait_for_port(port, 60s);
  const auto failed = train("--set train.epochs=1 --set log.mlflow_uri=http://127.0.0.1:" + std::to_string(port), "",
                            "work-500");
  ASSERT_EQ(failed.exit_code, 0) << failed.output;
  EXPECT_TRUE(fs::exists(dir_ / "work-500/out/model.pt"));
  std::vector<std::string> lines;
  for (std::size_t start = 0, end; start < failed.output.size(); start = end + 1) {
    end = failed.output.find('\n', start);
    if (end == std::string::npos) end = failed.output.size();
    const std::string line = failed.output.substr(start, end - start);
    if (line.find("MLflow (") != std::string::npos) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 1u) << failed.output;
  EXPECT_NE(lines[0].find("POST /api/2.0/mlflow/runs/create: HTTP 500: "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("the backend store is unavailable (test server)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("(gave up after 8 attempts)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("training goes on"), std::string::npos) << lines[0];
  std::string eight_creates;
  for (int i = 0; i < 8; ++i) eight_creates += "POST /api/2.0/mlflow/runs/create\n";
  EXPECT_EQ(failing.log(), eight_creates) << "the policy's attempts, then nothing more";

  // Command mode: MLflow's environment reaches the program, and trainpoint itself asks the server nothing.
  const auto command = train("--set 'job.command=[\"sh\", \"-c\", \"echo $MLFLOW_TRACKING_URI > "
                             "$TRAINPOINT_OUTPUT_DIR/uri-$RANK\"]'",
                             "MLFLOW_TRACKING_URI=http://127.0.0.1:" + std::to_string(port) + " ", "work-command");
  ASSERT_EQ(command.exit_code, 0) << command.output;
  EXPECT_EQ(testing::read_text(dir_ / "work-command/out/uri-1"), "http://127.0.0.1:" + std::to_string(port) + "\n");
  EXPECT_EQ(failing.log(), eight_creates) << "no request of the command-mode run";
}

// A tracking server behind a proxy that fails a third of the metric batches (503) and the first two ends of the
// run (503, then a connection reset after the server has taken it): the failures cost retries, not the run's
// history. Every metric is there once per step, the run ends FINISHED, and no warning says the sink gave up.
TEST_F(MlflowRun, AFlakyServerCostsRetriesAndTheRunKeepsEveryMetricAndItsEnd) {
  MlflowServer server(python_, dir_.path());
  const testing::FaultProxy proxy(server.port(), R"([
    {"method": "POST", "path_contains": "runs/log-batch", "fault": "503", "times": -1, "probability": 0.33},
    {"method": "POST", "path_contains": "runs/update", "fault": "503", "times": 1},
    {"method": "POST", "path_contains": "runs/update", "fault": "reset", "times": 1}])");
  const auto result = train("--set train.epochs=1 --set log.mlflow_uri=" + proxy.endpoint(),
                            "MLFLOW_EXPERIMENT_NAME=flaky ");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find("it gets no more records"), std::string::npos) << result.output;
  const std::string requests = proxy.requests();
  EXPECT_NE(requests.find("runs/log-batch - 503"), std::string::npos) << "a batch failed: " << requests;
  EXPECT_NE(requests.find("runs/update - reset"), std::string::npos) << requests;
  const json read = runs(server, "flaky");
  ASSERT_EQ(read.size(), 1u) << read.dump();
  EXPECT_EQ(read[0]["status"], "FINISHED") << read.dump();
  expect_metrics_of_the_records(read[0]);
}

// The MLflow run recorded in the output's checkpoints/<run key>/mlflow-run.json (a local copy of it).
json recorded_mlflow_run(const fs::path& output) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(output / "checkpoints")) {
    if (fs::exists(entry.path() / "mlflow-run.json")) found.push_back(entry.path() / "mlflow-run.json");
  }
  if (found.size() != 1) throw std::runtime_error("not one mlflow-run.json in " + output.string());
  std::ifstream in(found[0]);
  return json::parse(in);
}

TEST_F(MlflowRun, MlflowRunIdLogsIntoThatRunAndNoOther) {
  MlflowServer server(python_, dir_.path());
  // The user's code makes the run with MLflow's client and hands its id over.
  std::string run_id = run_checked(shell_quote(python_) + " " +
                                   shell_quote(testing::source_dir() + "/tests/telemetry/create_mlflow_run.py") +
                                   " " + server.uri() + " given mine");
  run_id = run_id.substr(0, run_id.find('\n'));
  ASSERT_EQ(run_id.size(), 32u) << run_id;
  const auto result = train("--set train.epochs=1 --set log.mlflow_uri=" + server.uri(),
                            "MLFLOW_EXPERIMENT_NAME=given MLFLOW_RUN_ID=" + run_id + " ");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find("MLflow"), std::string::npos) << "no warning: " << result.output;
  const json read = runs(server, "given");
  ASSERT_EQ(read.size(), 1u) << "no second run: " << read.dump();
  EXPECT_EQ(read[0]["run_id"], run_id);
  EXPECT_EQ(read[0]["name"], "mine") << "the user's name stays";
  EXPECT_EQ(read[0]["status"], "FINISHED") << read.dump();
  EXPECT_EQ(read[0]["tags"]["made.by"], "create_mlflow_run.py") << read[0]["tags"].dump();
  // A run given by its id gets the settings and tags as a run trainpoint creates does.
  EXPECT_EQ(read[0]["params"]["train.optimizer"], "adamw") << read[0]["params"].dump();
  EXPECT_EQ(read[0]["tags"]["trainpoint.run_key"].get<std::string>().size(), 12u) << read[0]["tags"].dump();
  EXPECT_EQ(read[0]["artifacts"], (json{"interpretation.json", "metrics.jsonl", "model.pt", "report.html"})) << read[0].dump();
  expect_metrics_of_the_records(read[0]);
  EXPECT_EQ(read[0]["metrics"]["train/loss"].size(), 4u) << read[0]["metrics"].dump();
  EXPECT_EQ(recorded_mlflow_run(output_dir())["run_id"], run_id);
}

// MLflow refuses a whole metrics batch for one name with a byte outside its set; a class name may hold any
// (interpretation/f1/<class>), so the sink, which knows MLflow's rule, replaces those bytes.
TEST_F(MlflowRun, TheSinkMakesEveryMetricNameOneMlflowTakes) {
  MlflowServer server(python_, dir_.path());
  telemetry::MlflowSettings settings;
  settings.tracking_uri = server.uri();
  settings.experiment_name = "names";
  settings.source = {"https://git.example/repo.git", std::string(40, 'a'), "main", "train.toml"};
  {
    telemetry::MlflowSink sink(settings);
    sink.run_started({{"train.lr", 0.1}}, telemetry::unix_seconds());
    sink.scalars(1, telemetry::unix_seconds(), {{"interpretation/f1/kind=\xc3\xa4,b", 0.5}, {"train/loss", 1.5}});
    sink.flush();
    sink.run_ended(telemetry::RunEnd::finished, telemetry::unix_seconds());
  }
  const json read = runs(server, "names");
  ASSERT_EQ(read.size(), 1u) << read.dump();
  EXPECT_EQ(read[0]["metrics"]["interpretation/f1/kind____b"], json::parse("[[1, 0.5]]")) << read[0].dump();
  EXPECT_EQ(read[0]["metrics"]["train/loss"], json::parse("[[1, 1.5]]")) << read[0].dump();
  EXPECT_EQ(read[0]["tags"]["mlflow.source.git.branch"], "main") << read[0]["tags"].dump();
  EXPECT_EQ(read[0]["tags"]["trainpoint.spec"], "train.toml") << read[0]["tags"].dump();
  EXPECT_EQ(read[0]["status"], "FINISHED");
}

TEST_F(MlflowRun, TwoOutputsOfTheSameSettingsEachContinueTheirOwnRun) {
  MlflowServer server(python_, dir_.path());
  testing::S3Server s3;
  const std::string environment = "MLFLOW_EXPERIMENT_NAME=twins ";
  const std::string s3_environment = environment + "AWS_ENDPOINT_URL=" + s3.endpoint() + " " +
                                     testing::S3Server::key_environment() + " ";
  const std::string mlflow = " --set log.mlflow_uri=" + server.uri();
  const std::string to_s3 = " --set job.output=s3://test-bucket/runs/twin-b";
  // The same settings, so the same run key, into two outputs: a local one (a) and an s3:// one (b), whose
  // second start is a new pod with nothing on its disk. Each is started, then resumed for a second epoch
  // after the other's start, so that the newest MLflow run of the key is always the other output's.
  auto ok = [](const testing::CommandResult& result) {
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(result.output.find("MLflow"), std::string::npos) << "no warning: " << result.output;
  };
  ok(train("--set train.epochs=1" + mlflow, environment, "a"));
  ok(train("--set train.epochs=1" + mlflow + to_s3, s3_environment, "b-pod-1"));
  const auto a = train("--set train.epochs=2" + mlflow, environment, "a");
  ok(a);
  EXPECT_NE(a.output.find("resumed from"), std::string::npos) << a.output;
  const auto b = train("--set train.epochs=2" + mlflow + to_s3, s3_environment, "b-pod-2");
  ok(b);
  EXPECT_NE(b.output.find("resumed from"), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("mlflow-run.json"), std::string::npos) << "fetched from the output: " << b.output;

  const json read = runs(server, "twins");
  ASSERT_EQ(read.size(), 2u) << read.dump();
  EXPECT_EQ(read[0]["tags"]["trainpoint.run_key"], read[1]["tags"]["trainpoint.run_key"]) << "the same run key";
  const json recorded_a = recorded_mlflow_run(dir_ / "a/out");
  const fs::path output_b = dir_ / "b-pod-2/outputs/test-bucket/runs/twin-b";  // the pod's copy of the output
  const json recorded_b = recorded_mlflow_run(output_b);
  EXPECT_EQ(recorded_a["run_id"], read[0]["run_id"]) << read.dump();
  EXPECT_EQ(recorded_b["run_id"], read[1]["run_id"]) << read.dump();
  EXPECT_EQ(recorded_a["tracking_uri"], server.uri());
  for (const auto& [run, output] : {std::pair{read[0], dir_ / "a/out"}, std::pair{read[1], output_b}}) {
    EXPECT_EQ(run["status"], "FINISHED") << run.dump();
    EXPECT_EQ(run["metrics"]["train/loss"].size(), 8u) << "both epochs, each step once: " << run["metrics"].dump();
    expect_metrics_of_the_records(run, output);
  }
}

TEST_F(MlflowRun, TheMlflowUiDrawsTheRunsMetricCharts) {
  MlflowServer server(python_, dir_.path());
  ASSERT_EQ(train("--set train.epochs=5 --set log.mlflow_uri=" + server.uri(), "MLFLOW_EXPERIMENT_NAME=boarded ").exit_code,
            0);
  const json read = runs(server, "boarded");
  ASSERT_EQ(read.size(), 1u) << read.dump();
  ASSERT_EQ(testing::run_command("command -v chromium").exit_code, 0)
      << "chromium is not installed: scripts/install-deps --tests installs it (scripts/deps/debian-test.txt)";
  // The run's page, Model metrics tab, in the "Model training" view, tall enough for every chart. MLflow's UI
  // loads its charts (plotly) lazily and refreshes them on a timer, which virtual time runs fast: a render can
  // catch them loading, so up to 4 renders (the later ones from a warm cache).
  // Below the tabs, right of the menu, left of the assistant panel that MLflow opens on a local server: the
  // charts' lines and markers in the run's colour (about 1,500 pixels a chart; one loading is a grey spinner).
  constexpr png_uint_32 kMain = 1410;
  const fs::path screenshot = dir_ / "mlflow.png";
  const std::string page = server.uri() + "/#/experiments/" + read[0]["experiment_id"].get<std::string>() + "/runs/" +
                           read[0]["run_id"].get<std::string>() + "/model-metrics?workflowType=machine_learning";
  Rgb image;
  std::size_t drawn = 0;
  for (int render = 0; render < 4 && drawn < 15000; ++render) {
    const auto shot = testing::run_command(
        "timeout 150 chromium --headless --no-sandbox --enable-unsafe-swiftshader --disable-dev-shm-usage "
        "--hide-scrollbars --user-data-dir=" + shell_quote((dir_ / "profile").string()) +
        " --window-size=1900,3800 --virtual-time-budget=120000 --screenshot=" + shell_quote(screenshot.string()) +
        " " + shell_quote(page));
    ASSERT_EQ(shot.exit_code, 0) << shot.output;
    ASSERT_TRUE(fs::exists(screenshot)) << shot.output;
    image = read_png(screenshot);
    drawn = coloured_pixels(image, 200, 250, kMain, image.height);
  }
  EXPECT_GT(drawn, 15000u) << "the charts were drawn (22 of them, 6 with one point each)";
  if (const char* keep = std::getenv("TP_KEEP_MLFLOW_SCREENSHOT")) write_left_of(image, kMain, keep);
}

TEST_F(TensorBoardRun, TurnedOffItWritesNothing) {
  const auto result = train("--set train.epochs=1 --set log.tensorboard=false");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(fs::exists(tensorboard_dir()));
}

TEST_F(TensorBoardRun, AnEventFileThatCannotBeWrittenIsOneWarningAndAFinishedJob) {
  fs::create_directories(output_dir());
  testing::write_text(tensorboard_dir(), "a file where the directory would be");
  const auto result = train();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::exists(output_dir() / "model.pt"));
  std::size_t warnings = 0;
  for (auto at = result.output.find("TensorBoard: cannot create"); at != std::string::npos;
       at = result.output.find("TensorBoard: cannot create", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << result.output;
}

}  // namespace
}  // namespace tp
