#include "data/transform.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tp::data {
namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Four floats in one SIMD register (GCC's and Clang's vector extension: SSE on x86-64, NEON on arm64).
constexpr std::size_t kLanes = 4;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// The resampling loops are inlined into one function per instruction set: on x86-64 the baseline and AVX2
// with FMA, chosen at run time.
#define TP_INLINE inline __attribute__((always_inline))

// Filter taps along one axis: output i reads `count[i]` source pixels from `first[i]` with the weights at
// weights[i * max_taps ...]. Flat arrays keep the inner loops free of indirection.
struct AxisTaps {
  int max_taps = 0;   // the stride of `weights`
  int most_taps = 0;  // the largest count
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
      taps.most_taps = std::max(taps.most_taps, 1);
      continue;
    }
    taps.first[static_cast<std::size_t>(i)] = first;
    taps.count[static_cast<std::size_t>(i)] = last - first;
    taps.most_taps = std::max(taps.most_taps, last - first);
    for (int k = 0; k < last - first; ++k) weights[k] = static_cast<float>(weights[k] / total);
  }
  return taps;
}

// The horizontal pass: a row of `width` floats (channels interleaved) from source column `first_column` on,
// filtered into planar output normalized by `multiply` and `add`.
struct HorizontalPass {
  const AxisTaps& columns;
  int first_column;
  int out_size;
  bool flip;
  Lanes multiply, add;
  float* out;
};

TP_INLINE void horizontal_gray(const HorizontalPass& pass, const float* row, int y) {
  float* target = pass.out + static_cast<std::size_t>(y) * pass.out_size;
  for (int x = 0; x < pass.out_size; ++x) {
    const float* weights = &pass.columns.weights[static_cast<std::size_t>(x) * pass.columns.max_taps];
    const float* pixel = row + (pass.columns.first[static_cast<std::size_t>(x)] - pass.first_column);
    float sum = 0;
    for (int k = 0; k < pass.columns.count[static_cast<std::size_t>(x)]; ++k) sum += weights[k] * pixel[k];
    target[pass.flip ? pass.out_size - 1 - x : x] = sum * pass.multiply[0] + pass.add[0];
  }
}

// RGB, two output rows (from rows row0 and row1) at once, sharing the weights: each source pixel's three
// channels are loaded as four floats (the fourth, the next pixel's first channel, is ignored). The results
// go to `staging` as channel-major pairs of rows, an L1-resident buffer copied to the output by whole rows
// (stored value by value into the planes of a large batch, they were the filter's costliest instructions).
// With Taps > 0 every output pixel reads Taps source pixels, the weights past its own count being zero: a
// fixed-length loop the compiler unrolls (15% faster than the per-pixel count, Taps = 0).
template <int Taps>
TP_INLINE void horizontal_rgb_pair(const HorizontalPass& pass, const float* row0, const float* row1,
                                   float* staging) {
  const std::size_t size = static_cast<std::size_t>(pass.out_size);
  for (int x = 0; x < pass.out_size; ++x) {
    const float* weights = &pass.columns.weights[static_cast<std::size_t>(x) * pass.columns.max_taps];
    const std::size_t offset =
        static_cast<std::size_t>(pass.columns.first[static_cast<std::size_t>(x)] - pass.first_column) * 3;
    const int count = Taps > 0 ? Taps : pass.columns.count[static_cast<std::size_t>(x)];
    Lanes sum0{}, sum1{};
    for (int k = 0; k < count; ++k) {
      Lanes value0, value1;
      std::memcpy(&value0, row0 + offset + static_cast<std::size_t>(k) * 3, sizeof value0);
      std::memcpy(&value1, row1 + offset + static_cast<std::size_t>(k) * 3, sizeof value1);
      sum0 += weights[k] * value0;
      sum1 += weights[k] * value1;
    }
    sum0 = sum0 * pass.multiply + pass.add;
    sum1 = sum1 * pass.multiply + pass.add;
    const std::size_t column = static_cast<std::size_t>(pass.flip ? pass.out_size - 1 - x : x);
    for (std::size_t c = 0; c < 3; ++c) {
      staging[2 * c * size + column] = sum0[c];
      staging[(2 * c + 1) * size + column] = sum1[c];
    }
  }
}

// The vertical pass of output row y over `width` bytes from byte `offset` of each source row, into `target`
// (contiguous bytes in, floats out, which the compiler vectorizes).
TP_INLINE void vertical(const Image& image, const AxisTaps& rows, int y, std::size_t offset,
                        std::size_t width, float* target) {
  const float* weights = &rows.weights[static_cast<std::size_t>(y) * rows.max_taps];
  const std::size_t stride = static_cast<std::size_t>(image.width) * image.channels;
  const std::uint8_t* source = image.row(rows.first[static_cast<std::size_t>(y)]) + offset;
  for (std::size_t i = 0; i < width; ++i) target[i] = weights[0] * static_cast<float>(source[i]);
  for (int k = 1; k < rows.count[static_cast<std::size_t>(y)]; ++k) {
    const float w = weights[k];
    source += stride;
    for (std::size_t i = 0; i < width; ++i) target[i] += w * static_cast<float>(source[i]);
  }
}

// Copies an output row to the batch. The batch is far larger than the caches and read later, possibly by
// another core: on x86-64 aligned rows bypass the cache (non-temporal stores), which saves reading each
// line before overwriting it. finish_rows() orders them before whatever publishes the batch.
TP_INLINE void store_row(float* target, const float* row, std::size_t size) {
#if defined(__x86_64__)
  if (reinterpret_cast<std::uintptr_t>(target) % 16 == 0 && size % 4 == 0) {
    for (std::size_t i = 0; i < size; i += 4) _mm_stream_ps(target + i, _mm_loadu_ps(row + i));
    return;
  }
#endif
  std::memcpy(target, row, size * sizeof(float));
}

TP_INLINE void finish_rows() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// Per-call working memory, L1-resident: the two intermediate rows (`width` floats each, then zeros for the
// horizontal filter's fixed-length reads past the end) and 6 output rows.
struct Scratch {
  float* row0;
  float* row1;
  float* staging;
};

// Both passes over all output rows, two at a time (an odd last row is computed twice).
TP_INLINE void filter(const Image& image, const AxisTaps& rows, const HorizontalPass& pass, std::size_t width,
                      const Scratch& scratch) {
  const std::size_t offset = static_cast<std::size_t>(pass.first_column) * image.channels;
  const std::size_t size = static_cast<std::size_t>(pass.out_size);
  for (int y0 = 0; y0 < pass.out_size; y0 += 2) {
    const int y1 = std::min(y0 + 1, pass.out_size - 1);
    vertical(image, rows, y0, offset, width, scratch.row0);
    vertical(image, rows, y1, offset, width, scratch.row1);
    if (image.channels == 1) {
      horizontal_gray(pass, scratch.row0, y0);
      horizontal_gray(pass, scratch.row1, y1);
      continue;
    }
    // As many taps as the widest output pixel reads: 2-3 when enlarging, 3-5 when shrinking up to 2x.
    // clang-format off
    switch (pass.columns.most_taps) {
      case 2: horizontal_rgb_pair<2>(pass, scratch.row0, scratch.row1, scratch.staging); break;
      case 3: horizontal_rgb_pair<3>(pass, scratch.row0, scratch.row1, scratch.staging); break;
      case 4: horizontal_rgb_pair<4>(pass, scratch.row0, scratch.row1, scratch.staging); break;
      case 5: horizontal_rgb_pair<5>(pass, scratch.row0, scratch.row1, scratch.staging); break;
      case 6: horizontal_rgb_pair<6>(pass, scratch.row0, scratch.row1, scratch.staging); break;
      case 7: horizontal_rgb_pair<7>(pass, scratch.row0, scratch.row1, scratch.staging); break;
      default: horizontal_rgb_pair<0>(pass, scratch.row0, scratch.row1, scratch.staging);
    }
    // clang-format on
    for (std::size_t c = 0; c < 3; ++c) {
      float* plane = pass.out + c * size * size;
      store_row(plane + static_cast<std::size_t>(y0) * size, scratch.staging + 2 * c * size, size);
      store_row(plane + static_cast<std::size_t>(y1) * size, scratch.staging + (2 * c + 1) * size, size);
    }
  }
  finish_rows();
}

using Filter = void (*)(const Image&, const AxisTaps&, const HorizontalPass&, std::size_t, const Scratch&);

void filter_baseline(const Image& image, const AxisTaps& rows, const HorizontalPass& pass, std::size_t width,
                     const Scratch& scratch) {
  filter(image, rows, pass, width, scratch);
}

#if defined(__x86_64__)
// 8-lane conversions in the vertical pass, fused multiply-adds in both (Haswell and later).
__attribute__((target("avx2,fma"))) void filter_avx2(const Image& image, const AxisTaps& rows,
                                                     const HorizontalPass& pass, std::size_t width,
                                                     const Scratch& scratch) {
  filter(image, rows, pass, width, scratch);
}
#endif

Filter best_filter() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return filter_avx2;
#endif
  return filter_baseline;
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
  int first_column = image.width, end_column = 0;
  for (int x = 0; x < out_size; ++x) {
    first_column = std::min(first_column, columns.first[static_cast<std::size_t>(x)]);
    end_column = std::max(end_column, columns.first[static_cast<std::size_t>(x)] +
                                          columns.count[static_cast<std::size_t>(x)]);
  }
  // Two output rows at a time: the vertical filter of the source rows into two rows, over only the columns
  // the horizontal filter reads, then the horizontal filter of both into the output. Vertical first,
  // the horizontal filter runs on out_size rows instead of every source row the crop spans, and the
  // intermediate rows stay in the L1 cache. (Linear filters commute; nothing is rounded in between.)
  const std::size_t width = static_cast<std::size_t>(end_column - first_column) * channels;
  const std::size_t padded_width = width + static_cast<std::size_t>(columns.max_taps) * channels + kLanes;
  const std::size_t staging = 6 * static_cast<std::size_t>(out_size);
  thread_local std::vector<float> buffer;
  buffer.assign(2 * padded_width + staging, 0.f);
  const Scratch scratch{buffer.data(), buffer.data() + padded_width, buffer.data() + 2 * padded_width};
  Lanes multiply{}, add{};
  for (int c = 0; c < channels; ++c) {
    multiply[c] = 1.f / (255.f * norm.std[c]);
    add[c] = -norm.mean[c] / norm.std[c];
  }
  const HorizontalPass pass{columns, first_column, out_size, flip, multiply, add, out};
  static const Filter filter_for_this_cpu = best_filter();
  filter_for_this_cpu(image, rows, pass, width, scratch);
}

}  // namespace tp::data
