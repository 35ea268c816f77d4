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

// Filter taps along one axis: output i reads `count[i]` source pixels from `first[i]` with the weights at
// weights[i * max_taps ...]. Flat arrays keep the inner loops free of indirection.
struct AxisTaps {
  int max_taps = 0;
  std::vector<int> first, count;
  std::vector<float> weights;
};

// PIL's resampling coefficients for a triangle (bilinear) filter, support widened by the shrink factor.
AxisTaps compute_taps(double start, double length, int in_size, int out_size) {
  const double scale = length / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle filter's support is 1
  AxisTaps taps;
  taps.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  taps.first.resize(static_cast<std::size_t>(out_size));
  taps.count.resize(static_cast<std::size_t>(out_size));
  taps.weights.assign(static_cast<std::size_t>(out_size) * taps.max_taps, 0.f);
  for (int i = 0; i < out_size; ++i) {
    const double center = start + (i + 0.5) * scale;
    const int first = std::max(0, static_cast<int>(center - support + 0.5));
    const int last = std::min({in_size, static_cast<int>(center + support + 0.5), first + taps.max_taps});
    float* weights = &taps.weights[static_cast<std::size_t>(i) * taps.max_taps];
    double total = 0;
    for (int x = first; x < last; ++x) {
      const double w = std::max(0.0, 1.0 - std::abs((x - center + 0.5) / filter_scale));
      weights[x - first] = static_cast<float>(w);
      total += w;
    }
    if (total <= 0) {  // a box entirely outside the image: take the nearest pixel
      taps.first[static_cast<std::size_t>(i)] = std::clamp(static_cast<int>(center), 0, in_size - 1);
      taps.count[static_cast<std::size_t>(i)] = 1;
      weights[0] = 1.f;
      continue;
    }
    taps.first[static_cast<std::size_t>(i)] = first;
    taps.count[static_cast<std::size_t>(i)] = last - first;
    for (int k = 0; k < last - first; ++k) weights[k] = static_cast<float>(weights[k] / total);
  }
  return taps;
}

// Resamples source rows [first_row, end_row) horizontally into out_size x C floats per row.
template <int C>
void horizontal_pass(const Image& image, const AxisTaps& columns, int first_row, int end_row, int out_size,
                     bool flip, float* out) {
  for (int y = first_row; y < end_row; ++y) {
    const std::uint8_t* source = image.row(y);
    float* target = out + static_cast<std::size_t>(y - first_row) * out_size * C;
    for (int x = 0; x < out_size; ++x) {
      const float* weights = &columns.weights[static_cast<std::size_t>(x) * columns.max_taps];
      const std::uint8_t* pixel =
          source + static_cast<std::size_t>(columns.first[static_cast<std::size_t>(x)]) * C;
      const int count = columns.count[static_cast<std::size_t>(x)];
      float sum[C] = {};
      for (int k = 0; k < count; ++k) {
        for (int c = 0; c < C; ++c) sum[c] += weights[k] * pixel[k * C + c];
      }
      float* o = target + static_cast<std::size_t>(flip ? out_size - 1 - x : x) * C;
      for (int c = 0; c < C; ++c) o[c] = sum[c];
    }
  }
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
  const AxisTaps columns = compute_taps(box.x, box.width, image.width, out_size);
  const AxisTaps rows = compute_taps(box.y, box.height, image.height, out_size);
  int first_row = image.height, end_row = 0;
  for (int y = 0; y < out_size; ++y) {
    first_row = std::min(first_row, rows.first[static_cast<std::size_t>(y)]);
    end_row =
        std::max(end_row, rows.first[static_cast<std::size_t>(y)] + rows.count[static_cast<std::size_t>(y)]);
  }
  // Horizontal pass over only the source rows the vertical pass reads: rows x out_size x channels.
  const std::size_t row_stride = static_cast<std::size_t>(out_size) * channels;
  thread_local std::vector<float> horizontal, accumulated;
  horizontal.resize(static_cast<std::size_t>(end_row - first_row) * row_stride);
  if (channels == 1) {
    horizontal_pass<1>(image, columns, first_row, end_row, out_size, flip, horizontal.data());
  } else {
    horizontal_pass<3>(image, columns, first_row, end_row, out_size, flip, horizontal.data());
  }
  // Vertical pass, normalizing into planar output.
  std::array<float, 3> multiply{}, add{};
  for (int c = 0; c < channels; ++c) {
    multiply[c] = 1.f / (255.f * norm.std[c]);
    add[c] = -norm.mean[c] / norm.std[c];
  }
  const std::size_t plane = static_cast<std::size_t>(out_size) * out_size;
  accumulated.resize(row_stride);
  for (int y = 0; y < out_size; ++y) {
    const float* weights = &rows.weights[static_cast<std::size_t>(y) * rows.max_taps];
    const int first = rows.first[static_cast<std::size_t>(y)];
    std::fill(accumulated.begin(), accumulated.end(), 0.f);
    float* acc = accumulated.data();
    for (int k = 0; k < rows.count[static_cast<std::size_t>(y)]; ++k) {
      const float w = weights[k];
      const float* source = horizontal.data() + static_cast<std::size_t>(first - first_row + k) * row_stride;
      for (std::size_t i = 0; i < row_stride; ++i) acc[i] += w * source[i];
    }
    for (int c = 0; c < channels; ++c) {
      float* target = out + static_cast<std::size_t>(c) * plane + static_cast<std::size_t>(y) * out_size;
      for (int x = 0; x < out_size; ++x) {
        target[x] = acc[static_cast<std::size_t>(x) * channels + c] * multiply[c] + add[c];
      }
    }
  }
}

}  // namespace tp::data
