// Image transforms: where to crop (resize, center crop, random resized crop, flip) and one fused pass that
// crops, resamples, flips and normalizes into planar float output. Random choices come from a generator
// seeded by (seed, epoch, sample index), so a sample's transform never depends on thread timing.
#pragma once

#include <array>
#include <cstdint>
#include <random>

#include "data/image.h"

namespace tp::data {

struct Normalization {
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> std{1.f, 1.f, 1.f};
  static Normalization imagenet(int channels);  // gray uses the mean of the RGB statistics
  static Normalization unit();                  // pixels / 255 only
};

struct ImageTransform {
  int size = 32;                     // output is size x size
  bool crop_to_square = false;       // eval: shorter side to `size`, then center crop; else stretch
  bool random_resized_crop = false;  // train: torchvision's RandomResizedCrop(scale 0.08-1, ratio 3/4-4/3)
  bool flip = false;                 // train: horizontal flip with probability 1/2
  Normalization normalization;
};

struct Placement {
  Box box;
  bool flip = false;
};

// A generator for one sample's random choices.
std::mt19937_64 sample_generator(std::uint64_t seed, std::int64_t epoch, std::uint64_t index);

// Where `transform` takes its pixels from in an image of `size`. `generator` is used only by random steps.
Placement place(const ImageTransform& transform, ImageSize size, std::mt19937_64& generator);

// Resamples `box` of `image` to out_size x out_size with a triangle filter widened when shrinking (as PIL's
// bilinear resize, so downscaling does not alias), mirrored if `flip`, and writes (pixel / 255 - mean) / std
// as channels x rows x columns floats to `out`.
void resample_normalized(const Image& image, const Box& box, int out_size, bool flip,
                         const Normalization& norm, float* out);

}  // namespace tp::data
