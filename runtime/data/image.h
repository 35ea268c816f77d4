// Image files in memory: PNG (libpng's simplified API) and JPEG (libjpeg-turbo: TurboJPEG for whole images,
// its libjpeg API for DCT-scaled, cropped decoding), decoded to 8-bit interleaved pixels. No LibTorch here,
// so tools and tests can use it cheaply.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tp::data {

struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;                  // 1 (gray) or 3 (RGB)
  std::vector<std::uint8_t> pixels;  // rows top to bottom, channels interleaved
  std::uint8_t* row(int y) { return pixels.data() + static_cast<std::size_t>(y) * width * channels; }
  const std::uint8_t* row(int y) const {
    return pixels.data() + static_cast<std::size_t>(y) * width * channels;
  }
};

// A region of an image in pixels (fractional edges allowed).
struct Box {
  double x = 0, y = 0, width = 0, height = 0;
};

enum class ImageType { png, jpeg, unknown };

// The type from the file's first bytes (not its name).
ImageType sniff_image(std::string_view bytes);
// Whether a file name has an image extension: .png, .jpg or .jpeg in any case.
bool has_image_extension(const std::filesystem::path& path);

struct ImageSize {
  int width = 0;
  int height = 0;
};

// The stored size, from the header only. Throws tp::Error (data) naming `name` if it is not a PNG/JPEG.
ImageSize read_image_size(std::string_view bytes, const std::string& name);

// Decodes to `channels` (1 or 3): gray is replicated, colour becomes ITU-R 601 luma, alpha is dropped
// (as PIL's convert does); CMYK and YCCK JPEGs become RGB as PIL reads them (Adobe's inverted CMYK). JPEG
// through TurboJPEG. Throws tp::Error (data) naming `name`.
Image decode_image(std::string_view bytes, const std::string& name, int channels);

// The part of an image decoded for one crop (possibly DCT-scaled and cropped); `box` is the requested region
// in `image`'s pixel coordinates.
struct DecodedRegion {
  Image image;
  Box box;
};

// Decodes what resampling `region` (in stored pixels) to out_size x out_size needs. A JPEG is decoded at the
// smallest DCT scale that keeps the region at least out_size wide and high, and only the rows and iMCU
// columns covering the region and the filter's margin (libjpeg-turbo's jpeg_skip_scanlines and
// jpeg_crop_scanline): rows below the region are never read. A PNG is decoded whole. Throws tp::Error (data)
// naming `name`.
// `out` is reused, so a thread decoding many images does not allocate (and fault in) fresh pixels each time.
void decode_for_resample(std::string_view bytes, const std::string& name, int channels, const Box& region,
                         int out_size, DecodedRegion& out);

// The image as JPEG bytes (4:2:0 for colour) at `quality` (1-100): the report's thumbnails. Throws tp::Error
// (output).
std::string encode_jpeg(const Image& image, int quality);

// Writers, used by tests and the dataset generator. Throw tp::Error (output) naming the path.
void write_png(const std::filesystem::path& path, const Image& image);
void write_jpeg(const std::filesystem::path& path, const Image& image, int quality);

}  // namespace tp::data
