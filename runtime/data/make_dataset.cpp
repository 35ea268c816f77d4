// Learnable synthetic datasets: image classes are shapes (circle, square, triangle, ...) at random positions,
// sizes and colours on a noisy background; table targets are a noisy function of the features. Same arguments,
// same bytes.
#include "data/make_dataset.h"

#include <fmt/format.h>
#include <cxxopts.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "data/image.h"
#include "spec/spec.h"

namespace tp::data {
namespace {

namespace fs = std::filesystem;

constexpr std::array<const char*, 8> shape_names = {
    "circle",           "square", "triangle", "horizontal_stripes",
    "vertical_stripes", "ring",   "cross",    "diagonal_stripes"};

// Whether (u, v), relative to the shape's centre in units of its radius, is inside shape `kind`.
bool inside(int kind, double u, double v) {
  const double r = std::hypot(u, v);
  switch (kind) {
    case 0:
      return r <= 1;
    case 1:
      return std::abs(u) <= 0.85 && std::abs(v) <= 0.85;
    case 2:
      return v <= 0.8 && v >= -1 + 2 * std::abs(u) - 0.2 && v >= -1;
    case 3:
      return std::abs(u) <= 1 && std::abs(v) <= 1 && std::fmod(v + 2, 0.5) < 0.25;
    case 4:
      return std::abs(u) <= 1 && std::abs(v) <= 1 && std::fmod(u + 2, 0.5) < 0.25;
    case 5:
      return r <= 1 && r >= 0.6;
    case 6:
      return (std::abs(u) <= 0.25 && std::abs(v) <= 1) || (std::abs(v) <= 0.25 && std::abs(u) <= 1);
    default:
      return std::abs(u) <= 1 && std::abs(v) <= 1 && std::fmod(u + v + 4, 0.6) < 0.3;
  }
}

Image draw_shape(int kind, int width, int height, int channels, std::mt19937_64& random) {
  std::uniform_real_distribution<double> unit(0, 1);
  const double radius = std::min(width, height) * (0.22 + 0.15 * unit(random));
  const double cx = radius + unit(random) * (width - 2 * radius);
  const double cy = radius + unit(random) * (height - 2 * radius);
  std::array<int, 3> background{}, foreground{};
  for (int c = 0; c < 3; ++c) {
    background[c] = static_cast<int>(20 + 70 * unit(random));
    foreground[c] = static_cast<int>(150 + 105 * unit(random));
  }
  std::normal_distribution<double> noise(0, 12);
  Image image{width, height, channels,
              std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * channels)};
  for (int y = 0; y < height; ++y) {
    std::uint8_t* row = image.row(y);
    for (int x = 0; x < width; ++x) {
      const bool in = inside(kind, (x + 0.5 - cx) / radius, (y + 0.5 - cy) / radius);
      const double n = noise(random);
      for (int c = 0; c < channels; ++c) {
        const double value = (in ? foreground : background)[c] + n;
        row[x * channels + c] = static_cast<std::uint8_t>(std::clamp(value, 0.0, 255.0));
      }
    }
  }
  return image;
}

std::pair<int, int> parse_size(const std::string& text) {
  int width = 0, height = 0;
  if (std::sscanf(text.c_str(), "%dx%d", &width, &height) == 2 && width > 0 && height > 0)
    return {width, height};
  if (std::sscanf(text.c_str(), "%d", &width) == 1 && width > 0) return {width, width};
  fail(ExitCode::usage, "--size: '{}' is not N or WxH", text);
}

void make_images(const cxxopts::ParseResult& args) {
  const fs::path out = args["out"].as<std::string>();
  const int classes = args["classes"].as<int>();
  if (classes < 2 || classes > static_cast<int>(shape_names.size())) {
    fail(ExitCode::usage, "--classes: between 2 and {}", shape_names.size());
  }
  const int count = args.count("count") ? args["count"].as<int>() : classes * args["per-class"].as<int>();
  const auto [width, height] = parse_size(args["size"].as<std::string>());
  const std::string format = args["format"].as<std::string>();
  if (format != "png" && format != "jpeg" && format != "mixed")
    fail(ExitCode::usage, "--format: png, jpeg or mixed");
  const int channels = args["channels"].as<int>();
  if (channels != 1 && channels != 3) fail(ExitCode::usage, "--channels: 1 or 3");
  std::mt19937_64 random(args["seed"].as<std::uint64_t>());
  for (int c = 0; c < classes; ++c) fs::create_directories(out / shape_names[static_cast<std::size_t>(c)]);
  for (int i = 0; i < count; ++i) {
    const int kind = i % classes;
    const Image image = draw_shape(kind, width, height, channels, random);
    const bool jpeg = format == "jpeg" || (format == "mixed" && (i / classes) % 2 == 1);
    const fs::path file =
        out / shape_names[static_cast<std::size_t>(kind)] / fmt::format("{:06d}.{}", i, jpeg ? "jpg" : "png");
    if (jpeg) {
      write_jpeg(file, image, 90);
    } else {
      write_png(file, image);
    }
  }
  fmt::print("{}: {} images of {}x{} in {} classes\n", out.string(), count, width, height, classes);
}

void make_table(const cxxopts::ParseResult& args) {
  const fs::path out = args["out"].as<std::string>();
  const int rows = args["rows"].as<int>();
  const auto task = spec::parse_choice<spec::Task>(args["task"].as<std::string>());
  if (!task || *task == spec::Task::multi_label) fail(ExitCode::usage, "--task: classification or regression");
  std::mt19937_64 random(args["seed"].as<std::uint64_t>());
  std::normal_distribution<double> gaussian(0, 1);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  std::ofstream file(out);
  file << "x1,x2,x3,x4,label\n";
  for (int r = 0; r < rows; ++r) {
    // Features on different scales, so standardization matters.
    const std::array<double, 4> x{gaussian(random), 10 * gaussian(random), 0.1 * gaussian(random) + 5,
                                  gaussian(random)};
    const double score = 2 * x[0] - 0.3 * x[1] + 10 * (x[2] - 5) + 0.05 * gaussian(random);
    file << fmt::format("{:.5f},{:.5f},{:.5f},{:.5f},", x[0], x[1], x[2], x[3]);
    if (*task == spec::Task::regression) {
      file << fmt::format("{:.5f}\n", score);
    } else {
      file << (score < -1 ? "low" : score < 1 ? "mid" : "high") << '\n';
    }
  }
  if (!file.flush()) fail(ExitCode::output, "{}: cannot write", out.string());
  fmt::print("{}: {} rows for {}\n", out.string(), rows, spec::name(*task));
}

}  // namespace

int run_make_dataset(const std::string& program, const std::vector<std::string>& args) {
  cxxopts::Options options(program, "Learnable synthetic datasets: `images` (an image folder of shapes, one "
                                    "subdirectory per class) or `table` (a CSV)");
  options.add_options()("kind", "images or table", cxxopts::value<std::string>())(
      "out", "output directory (images) or CSV file (table)", cxxopts::value<std::string>())(
      "classes", "image classes (shapes), 2-8", cxxopts::value<int>()->default_value("3"))(
      "per-class", "images per class", cxxopts::value<int>()->default_value("60"))(
      "count", "total images (overrides --per-class)", cxxopts::value<int>())(
      "size", "image size: N or WxH", cxxopts::value<std::string>()->default_value("32"))(
      "format", "png, jpeg or mixed", cxxopts::value<std::string>()->default_value("png"))(
      "channels", "1 (gray) or 3 (RGB)", cxxopts::value<int>()->default_value("3"))(
      "rows", "table rows", cxxopts::value<int>()->default_value("1000"))(
      "task", "table: classification or regression",
      cxxopts::value<std::string>()->default_value("classification"))(
      "seed", "random seed", cxxopts::value<std::uint64_t>()->default_value("1"))("h,help", "this help");
  options.parse_positional({"kind"});
  options.positional_help("images|table");
  options.set_width(110);
  std::vector<const char*> argv{program.c_str()};
  for (const auto& arg : args) argv.push_back(arg.c_str());
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const cxxopts::exceptions::exception& error) {
    fail(ExitCode::usage, "{} (see {} --help)", error.what(), program);
  }
  if (parsed.count("help")) {
    fmt::print("{}", options.help());
    return 0;
  }
  if (!parsed.count("kind") || !parsed.count("out")) {
    fmt::print(stderr, "{}", options.help());
    return static_cast<int>(ExitCode::usage);
  }
  const std::string kind = parsed["kind"].as<std::string>();
  if (kind == "images") {
    make_images(parsed);
  } else if (kind == "table") {
    make_table(parsed);
  } else {
    fail(ExitCode::usage, "unknown kind '{}': images or table", kind);
  }
  return 0;
}

}  // namespace tp::data
