#include "data/transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tp::data {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Filter taps of one output position along one axis.
struct Taps {
  int first = 0;
  std::vector<float> weights;
};

// PIL's resampling coefficients for a triangle (bilinear) filter, support widened by the shrink factor.
std::vector<Taps> compute_taps(double start, double length, int in_size, int out_size) {
  const double scale = length / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle filter's support is 1
  std::vector<Taps> taps(static_cast<std::size_t>(out_size));
  for (int i = 0; i < out_size; ++i) {
    const double center = start + (i + 0.5) * scale;
    const int first = std::max(0, static_cast<int>(center - support + 0.5));
    const int last = std::min(in_size, static_cast<int>(center + support + 0.5));
    Taps& t = taps[static_cast<std::size_t>(i)];
    t.first = first;
    double total = 0;
    for (int x = first; x < last; ++x) {
      const double w = std::max(0.0, 1.0 - std::abs((x - center + 0.5) / filter_scale));
      t.weights.push_back(static_cast<float>(w));
      total += w;
    }
    if (total <= 0) {  // a box entirely outside the image: take the nearest pixel
      t.first = std::clamp(static_cast<int>(center), 0, in_size - 1);
      t.weights.assign(1, 1.f);
      continue;
    }
    for (float& w : t.weights) w = static_cast<float>(w / total);
  }
  return taps;
}

}  // namespace

Normalization Normalization::imagenet(int channels) {
  if (channels == 1) return {{0.449f, 0.449f, 0.449f}, {0.226f, 0.226f, 0.226f}};
  return {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
}

Normalization Normalization::unit() {
  return {};
}

std::mt19937_64 sample_generator(std::uint64_t seed, std::int64_t epoch, std::uint64_t index) {
  const std::uint64_t mixed =
      splitmix64(splitmix64(splitmix64(seed) ^ static_cast<std::uint64_t>(epoch)) ^ index);
  return std::mt19937_64(mixed);
}

Placement place(const ImageTransform& transform, ImageSize size, std::mt19937_64& generator) {
  const double width = size.width, height = size.height;
  Placement placement;
  if (transform.random_resized_crop) {
    // torchvision.transforms.RandomResizedCrop.get_params with its defaults.
    const double area = width * height;
    std::uniform_real_distribution<double> scale(0.08, 1.0);
    std::uniform_real_distribution<double> log_ratio(std::log(3.0 / 4.0), std::log(4.0 / 3.0));
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      const double target_area = area * scale(generator);
      const double ratio = std::exp(log_ratio(generator));
      const double w = std::round(std::sqrt(target_area * ratio));
      const double h = std::round(std::sqrt(target_area / ratio));
      if (w > 0 && h > 0 && w <= width && h <= height) {
        const double x = std::uniform_int_distribution<int>(0, static_cast<int>(width - w))(generator);
        const double y = std::uniform_int_distribution<int>(0, static_cast<int>(height - h))(generator);
        placement.box = {x, y, w, h};
        found = true;
      }
    }
    if (!found) {  // the whole image, cut to the nearest allowed aspect ratio
      double w = width, h = height;
      if (width / height < 3.0 / 4.0) h = std::round(w / (3.0 / 4.0));
      if (width / height > 4.0 / 3.0) w = std::round(h * (4.0 / 3.0));
      placement.box = {(width - w) / 2, (height - h) / 2, w, h};
    }
  } else if (transform.crop_to_square) {
    const double side = std::min(width, height);
    placement.box = {(width - side) / 2, (height - side) / 2, side, side};
  } else {
    placement.box = {0, 0, width, height};
  }
  if (transform.flip) placement.flip = std::bernoulli_distribution(0.5)(generator);
  return placement;
}

void resample_normalized(const Image& image, const Box& box, int out_size, bool flip,
                         const Normalization& norm, float* out) {
  const int channels = image.channels;
  const std::vector<Taps> columns = compute_taps(box.x, box.width, image.width, out_size);
  const std::vector<Taps> rows = compute_taps(box.y, box.height, image.height, out_size);
  int first_row = image.height, end_row = 0;
  for (const Taps& t : rows) {
    first_row = std::min(first_row, t.first);
    end_row = std::max(end_row, t.first + static_cast<int>(t.weights.size()));
  }
  // Horizontal pass over only the source rows the vertical pass reads: rows x out_size x channels.
  const std::size_t row_stride = static_cast<std::size_t>(out_size) * channels;
  std::vector<float> horizontal(static_cast<std::size_t>(end_row - first_row) * row_stride);
  for (int y = first_row; y < end_row; ++y) {
    const std::uint8_t* source = image.row(y);
    float* target = horizontal.data() + static_cast<std::size_t>(y - first_row) * row_stride;
    for (int x = 0; x < out_size; ++x) {
      const Taps& t = columns[static_cast<std::size_t>(x)];
      const int out_x = flip ? out_size - 1 - x : x;
      for (int c = 0; c < channels; ++c) {
        float sum = 0;
        const std::uint8_t* pixel = source + static_cast<std::size_t>(t.first) * channels + c;
        for (std::size_t k = 0; k < t.weights.size(); ++k) sum += t.weights[k] * pixel[k * channels];
        target[static_cast<std::size_t>(out_x) * channels + c] = sum;
      }
    }
  }
  // Vertical pass, normalizing into planar output.
  std::array<float, 3> multiply{}, add{};
  for (int c = 0; c < channels; ++c) {
    multiply[c] = 1.f / (255.f * norm.std[c]);
    add[c] = -norm.mean[c] / norm.std[c];
  }
  const std::size_t plane = static_cast<std::size_t>(out_size) * out_size;
  std::vector<float> accumulated(row_stride);
  for (int y = 0; y < out_size; ++y) {
    const Taps& t = rows[static_cast<std::size_t>(y)];
    std::fill(accumulated.begin(), accumulated.end(), 0.f);
    for (std::size_t k = 0; k < t.weights.size(); ++k) {
      const float w = t.weights[k];
      const float* source = horizontal.data() +
                            static_cast<std::size_t>(t.first - first_row + static_cast<int>(k)) * row_stride;
      for (std::size_t i = 0; i < row_stride; ++i) accumulated[i] += w * source[i];
    }
    for (int c = 0; c < channels; ++c) {
      float* target = out + static_cast<std::size_t>(c) * plane + static_cast<std::size_t>(y) * out_size;
      for (int x = 0; x < out_size; ++x)
        target[x] = accumulated[static_cast<std::size_t>(x) * channels + c] * multiply[c] + add[c];
    }
  }
}

}  // namespace tp::data
