#include "data/thumbnail.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "data/image.h"

namespace tp::data {

namespace {

constexpr int kThumbnailQuality = 85;

}  // namespace

std::string thumbnail_jpeg(const at::Tensor& input, const Schema& schema, int max_size) {
  const auto channels = static_cast<std::int64_t>(schema.pixel_mean.size());
  if (input.dim() != 3 || input.size(0) != channels || (channels != 1 && channels != 3) ||
      schema.pixel_std.size() != schema.pixel_mean.size()) {
    fail(ExitCode::internal, "a thumbnail needs an image of {} channel(s), got an input of shape {}", channels,
         fmt::join(input.sizes(), "x"));
  }
  const at::Tensor mean = at::tensor(schema.pixel_mean, at::kDouble).to(at::kFloat).view({channels, 1, 1});
  const at::Tensor std = at::tensor(schema.pixel_std, at::kDouble).to(at::kFloat).view({channels, 1, 1});
  at::Tensor pixels = (input.detach().to(at::kCPU, at::kFloat) * std + mean) * 255.0;
  const std::int64_t longest = std::max(pixels.size(1), pixels.size(2));
  if (longest > max_size) {
    const double scale = static_cast<double>(max_size) / static_cast<double>(longest);
    const auto height = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(pixels.size(1)) * scale));
    const auto width = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(pixels.size(2)) * scale));
    pixels = at::adaptive_avg_pool2d(pixels.unsqueeze(0), {height, width}).squeeze(0);
  }
  const at::Tensor interleaved = pixels.round().clamp(0, 255).to(at::kByte).permute({1, 2, 0}).contiguous();
  Image image;
  image.height = static_cast<int>(interleaved.size(0));
  image.width = static_cast<int>(interleaved.size(1));
  image.channels = static_cast<int>(channels);
  image.pixels.resize(static_cast<std::size_t>(interleaved.numel()));
  std::memcpy(image.pixels.data(), interleaved.data_ptr<std::uint8_t>(), image.pixels.size());
  return encode_jpeg(image, kThumbnailQuality);
}

}  // namespace tp::data
