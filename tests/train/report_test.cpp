// report.html and the metrics files: the page's structure and values, its rendering in a real browser
// (headless Chromium), and how the records are kept when a run resumes.
#include "train/report.h"

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <png.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kChartWidth = 560, kChartHeight = 300;

json sample_record() {
  return {{"job", "cifar <small> & fast"},
          {"source",
           {{"repo", "https://git.example/team/vision.git"},
            {"ref", "main"},
            {"commit", "0123456789abcdef0123456789abcdef01234567"},
            {"spec", "train.toml"}}},
          {"resolved_spec", "[train]\nlr = 0.01    # train.toml:3:1\n"},
          {"world_size", 2},
          {"data",
           {{"train_samples", 4800},
            {"valid_samples", 1200},
            {"classes", {"cat", "dog"}},
            {"bad_files", {"cats/broken.png"}}}},
          {"started", "2024-05-01T10:00:00Z"},
          {"seconds", 123.4},
          {"versions", {{"trainpoint", "0.1.0"}, {"libtorch", "1.13.1"}}}};
}

// A run of `epochs` epochs of `steps_per_epoch` steps: a one-cycle-like lr and a loss that falls with noise.
struct SampleRun {
  std::vector<StepRecord> steps;
  std::vector<EpochMetrics> epochs;
};

SampleRun sample_run(int epochs, int steps_per_epoch) {
  SampleRun run;
  const int total = epochs * steps_per_epoch;
  for (int s = 1; s <= total; ++s) {
    const double t = static_cast<double>(s) / total;
    const double lr =
        t < 0.25 ? 0.01 * (0.04 + 0.96 * t / 0.25) : 0.01 * (1 + std::cos(M_PI * (t - 0.25) / 0.75)) / 2;
    StepRecord step{s, lr, 2.3 * std::exp(-3 * t) + 0.1 + 0.05 * std::sin(s * 1.7)};
    // Where the time went: the data wait grows in the second half, each epoch's first step checkpoints.
    step.times[StepPart::data_wait] = t < 0.5 ? 0.01 : 0.04;
    step.times[StepPart::forward_backward] = 0.06;
    step.times[StepPart::allreduce] = 0.02;
    step.times[StepPart::optimizer] = 0.005;
    step.times[StepPart::checkpoint] = (s - 1) % steps_per_epoch == 0 ? 0.03 : 0;
    step.seconds = step.times.total();
    run.steps.push_back(step);
  }
  for (int e = 1; e <= epochs; ++e) {
    EpochMetrics m;
    m.epoch = e;
    m.step = e * steps_per_epoch;
    m.lr = run.steps[static_cast<std::size_t>(m.step - 1)].lr;
    m.train_loss = 2.3 * std::exp(-3.0 * e / epochs) + 0.1;
    m.valid_loss = m.train_loss + 0.08;
    m.valid_accuracy = 0.5 + 0.4 * e / epochs - 0.0123;
    m.error_rate = 1 - m.valid_accuracy;
    m.top_k_accuracy = std::min(1.0, m.valid_accuracy + 0.08);
    m.mae = m.mse = std::nan("");
    m.seconds = 20.5;
    run.epochs.push_back(m);
  }
  return run;
}

// The points of every <path d="M x,y L x,y ..."> of the page, one list per path.
std::vector<std::vector<std::pair<double, double>>> svg_paths(const std::string& html) {
  std::vector<std::vector<std::pair<double, double>>> paths;
  const std::regex path_attribute(R"re(<path d="([^"]*)")re");
  const std::regex command(R"(^(M|L)(-?[0-9]+\.[0-9]),(-?[0-9]+\.[0-9])$)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), path_attribute); it != std::sregex_iterator();
       ++it) {
    std::vector<std::pair<double, double>> points;
    std::istringstream tokens((*it)[1].str());
    for (std::string token; tokens >> token;) {
      std::smatch parts;
      EXPECT_TRUE(std::regex_match(token, parts, command)) << "malformed path command '" << token << "'";
      if (parts.empty()) continue;
      points.emplace_back(std::stod(parts[2]), std::stod(parts[3]));
    }
    paths.push_back(points);
  }
  return paths;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Report, IsOneSelfContainedPageWithFourChartsAndTheRunsValues) {
  const SampleRun run = sample_run(6, 50);
  const json record = sample_record();
  const std::string html = render_report({record, run.steps, run.epochs, 6, 5, true});

  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos) << "nothing may be fetched";
  EXPECT_EQ(html.find("url("), std::string::npos) << "nothing may be fetched";
  EXPECT_EQ(count(html, "<svg"), 4u);
  EXPECT_EQ(count(html, "</svg>"), 4u);
  EXPECT_EQ(html.find("nan"), std::string::npos);

  // Train loss per step, valid loss per epoch, lr per step, then accuracy, error rate, top-5 per epoch.
  const auto paths = svg_paths(html);
  ASSERT_EQ(paths.size(), 6u);
  EXPECT_EQ(paths[0].size(), 300u);
  EXPECT_EQ(paths[1].size(), 6u);
  EXPECT_EQ(paths[2].size(), 300u);
  for (std::size_t i = 3; i < 6; ++i) EXPECT_EQ(paths[i].size(), 6u);
  for (const auto& path : paths) {
    for (const auto& [x, y] : path) {
      EXPECT_GE(x, 0);
      EXPECT_LE(x, kChartWidth);
      EXPECT_GE(y, 0);
      EXPECT_LE(y, kChartHeight);
    }
  }
  // The loss falls: the last point of the train loss is lower on the chart (a larger y) than the first.
  EXPECT_GT(paths[0].back().second, paths[0].front().second);
  // x grows with the step.
  for (std::size_t i = 1; i < paths[0].size(); ++i) EXPECT_GT(paths[0][i].first, paths[0][i - 1].first);

  EXPECT_NE(html.find("top-5 accuracy"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("{:.4f}", run.epochs.back().valid_accuracy)), std::string::npos);
  EXPECT_NE(html.find(fmt::format("{:.4f}", run.epochs.back().top_k_accuracy)), std::string::npos);
  EXPECT_NE(html.find("0123456789abcdef0123456789abcdef01234567"), std::string::npos);
  EXPECT_NE(html.find("cats/broken.png"), std::string::npos);
  EXPECT_NE(html.find("finished: 6 epochs in 123.4 s"), std::string::npos);
  EXPECT_NE(html.find("lr = 0.01    # train.toml:3:1"), std::string::npos) << "the resolved spec";
  EXPECT_NE(html.find("<td>2</td>"), std::string::npos) << "the world size";
  EXPECT_NE(html.find("cifar &lt;small&gt; &amp; fast"), std::string::npos) << "text is escaped";
  EXPECT_EQ(html.find("cifar <small>"), std::string::npos);
  EXPECT_EQ(html.find("MAE"), std::string::npos) << "regression metrics are not shown for classification";
}

TEST(Report, ParsesAsXml) {
  testing::TempDir dir;
  const SampleRun run = sample_run(3, 10);
  const json record = sample_record();
  testing::write_text(dir / "report.html", render_report({record, run.steps, run.epochs, 5, 5, false}));
  const auto result = testing::run_command(
      "/usr/bin/python3 -c \"import sys, xml.etree.ElementTree as ET; root = "
      "ET.parse(sys.argv[1]).getroot(); "
      "print(len(root.findall('.//svg')), len(root.findall('.//path')), len(root.findall('.//table')))\" " +
      testing::shell_quote((dir / "report.html").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "4 6 2\n");
}

TEST(Report, LongRunsAreThinnedGapsBreakTheLineAndEmptyChartsSaySo) {
  SampleRun run = sample_run(2, 5000);
  run.steps[100].train_loss = std::nan("");
  for (auto& m : run.epochs) {
    m.valid_loss = m.valid_accuracy = m.error_rate = m.top_k_accuracy = std::nan("");
  }
  const json record = sample_record();
  const std::string html = render_report({record, run.steps, run.epochs, 4, 5, false});
  const auto paths = svg_paths(html);
  ASSERT_EQ(paths.size(), 2u) << "train loss and lr; no validation series without validation values";
  EXPECT_LE(paths[0].size(), 800u);
  EXPECT_GE(paths[0].size(), 700u);
  EXPECT_NE(html.find("no values yet"), std::string::npos);
  EXPECT_NE(html.find("running: epoch 2 of 4 done"), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);

  std::vector<StepRecord> gap{{1, 0.1, 1.0}, {2, 0.1, std::nan("")}, {3, 0.1, 0.5}};
  const std::vector<EpochMetrics> none;
  const std::string short_html = render_report({record, gap, none, 1, 5, false});
  const auto start = short_html.find("<path d=\"") + 9;
  const std::string loss_path = short_html.substr(start, short_html.find('"', start) - start);
  EXPECT_EQ(loss_path.rfind("M64.0,", 0), 0u) << loss_path;
  EXPECT_EQ(count(loss_path, "M"), 2u) << "the missing value starts a new segment: " << loss_path;
}

// The bars of the step-time chart: (x, width, y, height, part) of each <rect data-part=...>.
struct Bar {
  double x, width, y, height;
  std::string part;
};
std::vector<Bar> step_bars(const std::string& html) {
  std::vector<Bar> bars;
  const std::regex rect(
      R"re(<rect x="([-0-9.]+)" y="([-0-9.]+)" width="([-0-9.]+)" height="([-0-9.]+)" fill="#[0-9a-f]+" data-part="([a-z_]+)"/>)re");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), rect); it != std::sregex_iterator(); ++it) {
    bars.push_back({std::stod((*it)[1]), std::stod((*it)[3]), std::stod((*it)[2]), std::stod((*it)[4]), (*it)[5]});
  }
  return bars;
}

TEST(Report, StepTimeChartStacksEachPartOfTheSteps) {
  const SampleRun run = sample_run(2, 30);  // 60 steps: one bar each
  const json record = sample_record();
  const std::string html = render_report({record, run.steps, run.epochs, 2, 5, true});
  EXPECT_NE(html.find("Time per step"), std::string::npos);
  const std::vector<Bar> bars = step_bars(html);
  std::map<std::string, int> per_part;
  for (const Bar& bar : bars) ++per_part[bar.part];
  EXPECT_EQ(per_part["data_wait"], 60);
  EXPECT_EQ(per_part["forward_backward"], 60);
  EXPECT_EQ(per_part["allreduce"], 60);
  EXPECT_EQ(per_part["optimizer"], 60);
  EXPECT_EQ(per_part["checkpoint"], 2) << "only the steps that wrote a checkpoint";
  // Stacked: in each bar the parts touch, and every bar stands on the axis.
  std::map<double, std::vector<Bar>> by_x;
  for (const Bar& bar : bars) by_x[bar.x].push_back(bar);
  ASSERT_EQ(by_x.size(), 60u);
  double first_height = 0, last_height = 0;
  for (const auto& [x, stack] : by_x) {
    for (std::size_t i = 1; i < stack.size(); ++i) EXPECT_NEAR(stack[i].y + stack[i].height, stack[i - 1].y, 0.11);
    EXPECT_NEAR(stack.front().y + stack.front().height, 300 - 44, 0.11);
    (first_height == 0 ? first_height : last_height) = stack.front().height;
    EXPECT_GE(stack.front().x, 64);
    EXPECT_LE(stack.front().x + stack.front().width, kChartWidth - 16 + 0.1);
  }
  EXPECT_GT(last_height, 3 * first_height) << "the data wait grew from 0.01 to 0.04 s per step";
  EXPECT_NE(html.find("Where the training steps&#39; time went: data wait 22.9%, forward+backward 53.8%"),
            std::string::npos)
      << "shares of the total time";

  // Records without timing (an older run resumed) leave the chart empty, not wrong.
  const std::vector<StepRecord> untimed{{1, 0.1, 1.0}, {2, 0.1, 0.9}};
  const std::string old_html = render_report({record, untimed, run.epochs, 2, 5, false});
  EXPECT_TRUE(step_bars(old_html).empty());
  EXPECT_EQ(old_html.find("Where the training steps"), std::string::npos);
}

// A regression whose loss falls from 10^4 to 1: the loss chart is logarithmic (a linear one is flat after the
// first steps), MAE and MSE have a chart each (on one axis they differ by orders of magnitude), and a short
// epoch's seconds are not 0.0.
TEST(Report, ALossOverDecadesIsLogarithmicAndRegressionErrorsHaveTheirOwnCharts) {
  SampleRun run = sample_run(4, 25);
  for (auto& step : run.steps) step.train_loss = 1e4 * std::pow(1e-4, (step.step - 1) / 99.0);
  for (auto& m : run.epochs) {
    m.valid_loss = m.mse = run.steps[static_cast<std::size_t>(m.step - 1)].train_loss;
    m.mae = std::sqrt(m.mse);
    m.valid_accuracy = m.error_rate = m.top_k_accuracy = std::nan("");
    m.seconds = 0.0421;
  }
  json record = sample_record();
  record["seconds"] = 0.168;
  const std::string html = render_report({record, run.steps, run.epochs, 4, 5, true});
  EXPECT_EQ(count(html, "<svg"), 5u) << "loss, lr, MAE, MSE and the time per step";
  EXPECT_NE(html.find(">Loss (log scale)</text>"), std::string::npos);
  EXPECT_NE(html.find(">Validation MAE</text>"), std::string::npos);
  EXPECT_NE(html.find(">Validation MSE (log scale)</text>"), std::string::npos);
  EXPECT_EQ(html.find(">Validation metrics</text>"), std::string::npos) << "no fraction to show";
  for (const char* tick : {">10000</text>", ">100</text>", ">1</text>"}) EXPECT_NE(html.find(tick), std::string::npos) << tick;
  // The loss falls steadily: on a log axis its points are evenly spaced in height.
  const auto paths = svg_paths(html);
  ASSERT_FALSE(paths.empty());
  const auto& loss = paths[0];
  ASSERT_EQ(loss.size(), 100u);
  EXPECT_NEAR(loss[25].second - loss[0].second, loss[99].second - loss[74].second, 0.3);
  EXPECT_NE(html.find("<td>0.0421</td></tr>"), std::string::npos) << "seconds of each epoch";
  EXPECT_NE(html.find("finished: 4 epochs in 0.168 s"), std::string::npos);
  EXPECT_EQ(html.find("nan"), std::string::npos);
}

TEST(Report, LrFindPageShowsTheLossAgainstTheLearningRateAndTheSuggestions) {
  std::vector<LrFindPoint> points;
  for (int i = 0; i < 60; ++i) {
    const double lr = 1e-7 * std::pow(1e8, i / 99.0);
    points.push_back({i + 1, lr, 2.0 - 0.02 * i + 0.05 * std::sin(i), 2.0 - 0.02 * i});
  }
  const std::string html = render_lr_find("blobs", points, 1e-3, 3e-3);
  EXPECT_EQ(count(html, "<svg"), 1u);
  const auto paths = svg_paths(html);
  ASSERT_EQ(paths.size(), 2u);
  EXPECT_EQ(paths[0].size(), 60u);
  EXPECT_EQ(paths[1].size(), 60u);
  EXPECT_NE(html.find("log10(learning rate)"), std::string::npos);
  EXPECT_NE(html.find("Suggested train.lr: 0.001"), std::string::npos);
  EXPECT_NE(html.find("steepest descent at 0.003"), std::string::npos);
  EXPECT_NE(html.find(">-6<"), std::string::npos) << "ticks in log10(lr): -6, -4";
  EXPECT_NE(html.find(">-4<"), std::string::npos);
}

struct Pixels {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  std::vector<png_byte> rgb;
};

Pixels read_png(const fs::path& file) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, file.c_str())) throw std::runtime_error(image.message);
  image.format = PNG_FORMAT_RGB;
  Pixels pixels;
  pixels.width = image.width;
  pixels.height = image.height;
  pixels.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.rgb.data(), 0, nullptr))
    throw std::runtime_error(image.message);
  return pixels;
}

// Pixels within a small distance of a colour (anti-aliasing blends the edges of lines).
std::size_t pixels_near(const Pixels& pixels, int r, int g, int b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i + 2 < pixels.rgb.size(); i += 3) {
    if (std::abs(pixels.rgb[i] - r) + std::abs(pixels.rgb[i + 1] - g) + std::abs(pixels.rgb[i + 2] - b) < 30)
      ++n;
  }
  return n;
}

TEST(Report, ChromiumRendersTheChartsAndTables) {
  const auto found = testing::run_command("command -v chromium");
  ASSERT_EQ(found.exit_code, 0)
      << "chromium is not installed: scripts/install-deps --tests installs it (scripts/deps/debian-test.txt)";
  testing::TempDir dir;
  const SampleRun run = sample_run(6, 50);
  const json record = sample_record();
  write_report(dir / "report.html", {record, run.steps, run.epochs, 6, 5, true});
  const fs::path screenshot = dir / "report.png";
  const auto result = testing::run_command(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars "
      "--user-data-dir=" +
      testing::shell_quote((dir / "profile").string()) +
      " --window-size=1200,1600 --screenshot=" + testing::shell_quote(screenshot.string()) + " " +
      testing::shell_quote("file://" + (dir / "report.html").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  ASSERT_TRUE(fs::exists(screenshot)) << result.output;
  if (const char* keep = std::getenv("TP_KEEP_REPORT_SCREENSHOT"))
    fs::copy_file(screenshot, keep, fs::copy_options::overwrite_existing);
  EXPECT_GT(fs::file_size(screenshot), 20000u);

  const Pixels pixels = read_png(screenshot);
  EXPECT_EQ(pixels.width, 1200u);
  EXPECT_EQ(pixels.height, 1600u);
  std::set<std::uint32_t> colours;
  for (std::size_t i = 0; i + 2 < pixels.rgb.size(); i += 3) {
    colours.insert(pixels.rgb[i] << 16 | pixels.rgb[i + 1] << 8 | pixels.rgb[i + 2]);
  }
  EXPECT_GT(colours.size(), 50u) << "not a blank page";
  // The series were drawn: each line's colour covers a few hundred pixels.
  EXPECT_GT(pixels_near(pixels, 0x1f, 0x77, 0xb4), 300u) << "train loss";
  EXPECT_GT(pixels_near(pixels, 0xff, 0x7f, 0x0e), 100u) << "valid loss";
  EXPECT_GT(pixels_near(pixels, 0x17, 0xa2, 0xb8), 300u) << "learning rate";
  EXPECT_GT(pixels_near(pixels, 0x2c, 0xa0, 0x2c), 100u) << "accuracy";
  // The step-time chart: each part's colour fills its share of the bars.
  EXPECT_GT(pixels_near(pixels, 0xe1, 0x57, 0x59), 300u) << "data wait";
  EXPECT_GT(pixels_near(pixels, 0x4e, 0x79, 0xa7), 300u) << "forward+backward";
  EXPECT_GT(pixels_near(pixels, 0xf2, 0x8e, 0x2b), 300u) << "all-reduce";
  EXPECT_GT(pixels_near(pixels, 0x59, 0xa1, 0x4f), 50u) << "optimizer";
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(MetricsLog, ReopeningKeepsOnlyTheRecordsUpToTheResumePoint) {
  testing::TempDir dir;
  const SampleRun run = sample_run(3, 4);
  {
    MetricsLog log(dir.path(), 0, 0);
    for (const auto& s : run.steps) log.write_step(s);
    for (const auto& m : run.epochs) log.write_epoch(m);
  }
  EXPECT_EQ(lines_of(dir / "steps.jsonl").size(), 12u);
  EXPECT_EQ(lines_of(dir / "metrics.jsonl").size(), 3u);
  const auto csv = lines_of(dir / "metrics.csv");
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_EQ(csv[0], "epoch,step,lr,train_loss,valid_loss,accuracy,error_rate,top_k_accuracy,mae,mse,seconds,f1");
  EXPECT_EQ(json::parse(lines_of(dir / "metrics.jsonl")[0])["mae"], nullptr);

  // Resumed from the checkpoint after epoch 1 and 2 more steps: the later records go.
  MetricsLog resumed(dir.path(), 1, 6);
  ASSERT_EQ(resumed.epochs().size(), 1u);
  EXPECT_DOUBLE_EQ(resumed.epochs()[0].valid_accuracy, run.epochs[0].valid_accuracy);
  EXPECT_TRUE(std::isnan(resumed.epochs()[0].mae));
  ASSERT_EQ(resumed.steps().size(), 6u);
  EXPECT_EQ(resumed.steps().back().step, 6);
  EXPECT_EQ(lines_of(dir / "steps.jsonl").size(), 6u);
  EXPECT_EQ(lines_of(dir / "metrics.jsonl").size(), 1u);
  EXPECT_EQ(lines_of(dir / "metrics.csv").size(), 2u);

  // A fresh run starts empty.
  MetricsLog fresh(dir.path(), 0, 0);
  EXPECT_TRUE(fresh.epochs().empty());
  EXPECT_TRUE(lines_of(dir / "steps.jsonl").empty());
}

TEST(MetricsLog, AnEpochsF1AndExtraEntriesAreReadBackAndKeptWhenReopened) {
  testing::TempDir dir;
  const SampleRun run = sample_run(2, 2);
  EpochMetrics first = run.epochs[0];
  first.class_f1 = {{"cat", 0.8}, {"dog", 0.0}, {"newt", std::nan("")}};
  first.f1 = macro_average(first.class_f1);
  const json stop = {{"early_stop", {{"epoch", 2}, {"reason", "stopped at epoch 2: ..."}}}};
  {
    MetricsLog log(dir.path(), 0, 0);
    log.write_epoch(first);
    log.write_epoch(run.epochs[1], stop);
  }
  // Reopened to resume after epoch 2: both lines as they were, the second with its verdict.
  const std::vector<std::string> before = lines_of(dir / "metrics.jsonl");
  MetricsLog reopened(dir.path(), 2, 4);
  EXPECT_EQ(lines_of(dir / "metrics.jsonl"), before);
  const json second = json::parse(before.at(1));
  EXPECT_EQ(second["early_stop"], stop["early_stop"]);
  const json line = json::parse(before.at(0));
  EXPECT_DOUBLE_EQ(line["f1"].get<double>(), 0.4) << "the mean over the classes seen: cat and dog";
  EXPECT_TRUE(line["class_f1"]["newt"].is_null());
  ASSERT_EQ(reopened.epochs().size(), 2u);
  EXPECT_DOUBLE_EQ(reopened.epochs()[0].f1, 0.4);
  EXPECT_EQ(reopened.epochs()[0].class_f1.size(), 3u);
  EXPECT_TRUE(std::isnan(reopened.epochs()[1].f1)) << "an epoch without F1";
  EXPECT_EQ(lines_of(dir / "metrics.csv").at(1).substr(lines_of(dir / "metrics.csv").at(1).rfind(',')), ",0.4");
}

TEST(MetricsLog, ClassF1IsTwiceTheTruePositivesOverPredictedPlusActual) {
  const ClassValues scores = class_f1_scores({{2, 0, 0, 5}, {3, 1, 0, 5}, {2, 2, 0, 6}}, {"a", "b", "c", "d"});
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_DOUBLE_EQ(scores[0].second, 0.8);
  EXPECT_DOUBLE_EQ(scores[1].second, 0.0) << "predicted once, wrongly; present twice, never found";
  EXPECT_TRUE(std::isnan(scores[2].second)) << "neither present nor predicted";
  EXPECT_DOUBLE_EQ(scores[3].second, 10.0 / 11.0);
  EXPECT_DOUBLE_EQ(macro_average(scores), (0.8 + 0.0 + 10.0 / 11.0) / 3);
  EXPECT_TRUE(std::isnan(macro_average({{"a", std::nan("")}})));
}

TEST(MetricsLog, ValidationSummaryNamesOnlyTheMetricsThatApply) {
  EpochMetrics m;
  m.valid_loss = 0.5;
  m.valid_accuracy = 0.8;
  m.error_rate = 0.2;
  m.top_k_accuracy = 0.95;
  m.mae = m.mse = std::nan("");
  EXPECT_EQ(describe_validation(m, 5),
            "valid_loss 0.5000 accuracy 0.8000 error_rate 0.2000 top_5_accuracy 0.9500");
  m.f1 = 0.75;
  EXPECT_EQ(describe_validation(m, 5),
            "valid_loss 0.5000 accuracy 0.8000 error_rate 0.2000 top_5_accuracy 0.9500 f1 0.7500");
  m.f1 = std::nan("");
  m.valid_accuracy = m.error_rate = m.top_k_accuracy = std::nan("");
  m.mae = 0.3;
  m.mse = 0.5;
  EXPECT_EQ(describe_validation(m, 5), "valid_loss 0.5000 mae 0.3000 mse 0.5000");
}

}  // namespace
}  // namespace tp::train
