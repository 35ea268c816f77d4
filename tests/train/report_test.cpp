// report.html and the metrics files: the page's structure and values, its rendering in a real browser
// (headless Chromium), and how the records are kept when a run resumes.
#include "train/report.h"

#include <gtest/gtest.h>
#include <fmt/format.h>
#include <png.h>

#include <cmath>
#include <fstream>
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
    run.steps.push_back({s, lr, 2.3 * std::exp(-3 * t) + 0.1 + 0.05 * std::sin(s * 1.7)});
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

TEST(Report, IsOneSelfContainedPageWithThreeChartsAndTheRunsValues) {
  const SampleRun run = sample_run(6, 50);
  const json record = sample_record();
  const std::string html = render_report({record, run.steps, run.epochs, 6, 5, true});

  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos) << "nothing may be fetched";
  EXPECT_EQ(html.find("url("), std::string::npos) << "nothing may be fetched";
  EXPECT_EQ(count(html, "<svg"), 3u);
  EXPECT_EQ(count(html, "</svg>"), 3u);
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
  EXPECT_EQ(result.output, "3 6 2\n");
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
      << "chromium is not installed: scripts/install-deps installs it (scripts/deps/debian.txt)";
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
  EXPECT_EQ(csv[0], "epoch,step,lr,train_loss,valid_loss,accuracy,error_rate,top_k_accuracy,mae,mse,seconds");
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

TEST(MetricsLog, ValidationSummaryNamesOnlyTheMetricsThatApply) {
  EpochMetrics m;
  m.valid_loss = 0.5;
  m.valid_accuracy = 0.8;
  m.error_rate = 0.2;
  m.top_k_accuracy = 0.95;
  m.mae = m.mse = std::nan("");
  EXPECT_EQ(describe_validation(m, 5),
            "valid_loss 0.5000 accuracy 0.8000 error_rate 0.2000 top_5_accuracy 0.9500");
  m.valid_accuracy = m.error_rate = m.top_k_accuracy = std::nan("");
  m.mae = 0.3;
  m.mse = 0.5;
  EXPECT_EQ(describe_validation(m, 5), "valid_loss 0.5000 mae 0.3000 mse 0.5000");
}

}  // namespace
}  // namespace tp::train
