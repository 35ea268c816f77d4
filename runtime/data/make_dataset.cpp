// Learnable synthetic datasets: image classes are shapes (circle, square, triangle, ...) at random positions,
// sizes and colours on a noisy background; table targets are a noisy function of the features. Same request,
// same bytes.
#include "data/make_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "data/image.h"

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

// Whether image `round` (each class's n-th image) of `format` is a JPEG file.
bool writes_jpeg(ImageFileFormat format, int round) {
  switch (format) {
    case ImageFileFormat::png: return false;
    case ImageFileFormat::jpeg: return true;
    case ImageFileFormat::mixed: return round % 2 == 1;
  }
  spec::unhandled(format);
}

void make_images(const MakeDatasetRequest& request) {
  const fs::path out = request.out;
  const int classes = request.classes;
  if (classes < 2 || classes > static_cast<int>(shape_names.size())) {
    fail(ExitCode::usage, "--classes: between 2 and {}", shape_names.size());
  }
  const int channels = request.channels;
  if (channels != 1 && channels != 3) fail(ExitCode::usage, "--channels: 1 or 3");
  const int width = request.width;
  const int height = request.height;
  std::mt19937_64 random(request.seed);
  for (int c = 0; c < classes; ++c) fs::create_directories(out / shape_names[static_cast<std::size_t>(c)]);
  for (int i = 0; i < request.count; ++i) {
    const int kind = i % classes;
    const Image image = draw_shape(kind, width, height, channels, random);
    const bool jpeg = writes_jpeg(request.format, i / classes);
    const fs::path file =
        out / shape_names[static_cast<std::size_t>(kind)] / fmt::format("{:06d}.{}", i, jpeg ? "jpg" : "png");
    if (jpeg) {
      write_jpeg(file, image, 90);
    } else {
      write_png(file, image);
    }
  }
  fmt::print("{}: {} images of {}x{} in {} classes\n", out.string(), request.count, width, height, classes);
}

void make_table(const MakeDatasetRequest& request) {
  const fs::path out = request.out;
  const int rows = request.rows;
  const spec::Task task = request.task;
  if (task == spec::Task::multi_label) fail(ExitCode::usage, "--task: classification or regression");
  std::mt19937_64 random(request.seed);
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
    if (task == spec::Task::regression) {
      file << fmt::format("{:.5f}\n", score);
    } else {
      file << (score < -1 ? "low" : score < 1 ? "mid" : "high") << '\n';
    }
  }
  if (!file.flush()) fail(ExitCode::output, "{}: cannot write", out.string());
  fmt::print("{}: {} rows for {}\n", out.string(), rows, spec::name(task));
}

}  // namespace

int make_dataset(const MakeDatasetRequest& request) {
  switch (request.kind) {
    case DatasetKind::images: make_images(request); return 0;
    case DatasetKind::table: make_table(request); return 0;
  }
  spec::unhandled(request.kind);
}

}  // namespace tp::data
