#include "data/image.h"

#include <png.h>
#include <turbojpeg.h>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <csetjmp>
#include <cstdio>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "common/files.h"

namespace tp::data {
namespace {

constexpr std::string_view png_signature = "\x89PNG\r\n\x1a\n";

// TurboJPEG handles are not thread-safe but are reusable: one per thread and direction.
struct TurboHandle {
  explicit TurboHandle(bool compress) : handle(compress ? tjInitCompress() : tjInitDecompress()) {}
  ~TurboHandle() {
    if (handle) tjDestroy(handle);
  }
  tjhandle handle;
};

tjhandle decompressor() {
  thread_local TurboHandle turbo(false);
  if (!turbo.handle) fail(ExitCode::internal, "cannot initialise TurboJPEG: {}", tjGetErrorStr2(nullptr));
  return turbo.handle;
}

const auto* jpeg_data(std::string_view bytes) {
  return reinterpret_cast<const unsigned char*>(bytes.data());
}

// PIL's "L" conversion: ITU-R 601-2 luma in its 16-bit fixed point, rounded.
std::uint8_t luma(const std::uint8_t* rgb) {
  return static_cast<std::uint8_t>((rgb[0] * 19595 + rgb[1] * 38470 + rgb[2] * 7471 + 0x8000) >> 16);
}

// Four-channel JPEGs as PIL reads them (ImageNet has some): libjpeg's CMYK samples (YCCK converted to them)
// are Adobe's inverted CMYK, from which PIL's RGB is (255 - K) - C (255 - K) / 255 in its rounding; gray is
// that RGB's luma.
void inverted_cmyk_to(const std::uint8_t* in, std::size_t count, int channels, std::uint8_t* out) {
  for (std::size_t i = 0; i < count; ++i, in += 4, out += channels) {
    const int white = in[3];  // 255 - K
    std::uint8_t rgb[3];
    for (int c = 0; c < 3; ++c) {
      const int product = (255 - in[c]) * white + 128;
      rgb[c] = static_cast<std::uint8_t>(white - (((product >> 8) + product) >> 8));
    }
    if (channels == 1) {
      out[0] = luma(rgb);
    } else {
      std::memcpy(out, rgb, 3);
    }
  }
}

// Converts interleaved pixels of `from` channels (1 gray, 2 gray+alpha, 3 RGB, 4 RGBA) to `to` (1 or 3).
Image convert_channels(int width, int height, int from, const std::vector<std::uint8_t>& pixels, int to) {
  Image out{width, height, to, std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * to)};
  const bool colour = from >= 3;
  const std::size_t count = static_cast<std::size_t>(width) * height;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t* in = pixels.data() + i * from;
    std::uint8_t* o = out.pixels.data() + i * to;
    if (to == 1) {
      o[0] = colour ? luma(in) : in[0];
    } else if (colour) {
      std::memcpy(o, in, 3);
    } else {
      o[0] = o[1] = o[2] = in[0];
    }
  }
  return out;
}

Image decode_png(std::string_view bytes, const std::string& name, int channels) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
    fail(ExitCode::data, "{}: not a readable PNG: {}", name, png.message);
  }
  // Keep the file's own layout (8-bit), converting channels ourselves so gray, RGB and alpha behave like PIL.
  const bool colour = (png.format & PNG_FORMAT_FLAG_COLOR) != 0;
  const bool alpha = (png.format & PNG_FORMAT_FLAG_ALPHA) != 0;
  png.format = (colour ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY) | (alpha ? PNG_FORMAT_FLAG_ALPHA : 0);
  const int stored = static_cast<int>(PNG_IMAGE_SAMPLE_CHANNELS(png.format));
  std::vector<std::uint8_t> pixels(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, pixels.data(), 0, nullptr)) {
    const std::string message = png.message;
    png_image_free(&png);
    fail(ExitCode::data, "{}: corrupted PNG: {}", name, message);
  }
  const int width = static_cast<int>(png.width), height = static_cast<int>(png.height);
  if (stored == channels) return Image{width, height, channels, std::move(pixels)};
  return convert_channels(width, height, stored, pixels, channels);
}

Image decode_jpeg(std::string_view bytes, const std::string& name, int channels) {
  tjhandle handle = decompressor();
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, jpeg_data(bytes), bytes.size(), &width, &height, &subsampling,
                          &colorspace) != 0) {
    fail(ExitCode::data, "{}: not a readable JPEG: {}", name, tjGetErrorStr2(handle));
  }
  const std::size_t count = static_cast<std::size_t>(width) * height;
  Image image{width, height, channels, std::vector<std::uint8_t>(count * channels)};
  const bool cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  std::vector<std::uint8_t> cmyk_pixels(cmyk ? count * 4 : 0);
  const TJPF format = cmyk ? TJPF_CMYK : (channels == 1 ? TJPF_GRAY : TJPF_RGB);
  if (tjDecompress2(handle, jpeg_data(bytes), bytes.size(), cmyk ? cmyk_pixels.data() : image.pixels.data(),
                    width, 0, height, format, 0) != 0) {
    // A warning (for example trailing garbage) still leaves a complete image.
    if (tjGetErrorCode(handle) != TJERR_WARNING) {
      fail(ExitCode::data, "{}: corrupted JPEG: {}", name, tjGetErrorStr2(handle));
    }
  }
  if (cmyk) inverted_cmyk_to(cmyk_pixels.data(), count, channels, image.pixels.data());
  return image;
}

// libjpeg reports errors through a callback that must not return: jump back to decode_jpeg_region.
struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_jpeg_error(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (for example a truncated file, whose missing rows libjpeg fills) still give a complete image.
void on_jpeg_warning(j_common_ptr /*info*/, int /*level*/) {}

// No object with a destructor is created between setjmp and the libjpeg calls, so longjmp is safe; `result`
// lives in the caller's frame.
void decode_jpeg_region(std::string_view bytes, const std::string& name, int channels, const Box& region,
                        int out_size, DecodedRegion& result) {
  jpeg_decompress_struct info;
  JpegErrors errors;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = on_jpeg_error;
  errors.manager.emit_message = on_jpeg_warning;
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&info);
    fail(ExitCode::data, "{}: corrupted JPEG: {}", name, errors.message);
  }
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, jpeg_data(bytes), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  const bool cmyk = info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK;
  info.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  // The smallest of 1/8, 1/4 and 1/2 keeping the region at least out_size pixels in both directions, else 1:
  // libjpeg-turbo has SIMD inverse DCTs only for these; its other scales (3/8, 5/8, ...) are slower than 1.
  const double needed = std::max(out_size / region.width, out_size / region.height);
  info.scale_num = 8;
  info.scale_denom = 8;
  for (unsigned num : {1u, 2u, 4u}) {
    if (num / 8.0 >= needed) {
      info.scale_num = num;
      break;
    }
  }
  jpeg_start_decompress(&info);
  const int width = static_cast<int>(info.output_width), height = static_cast<int>(info.output_height);
  const double sx = static_cast<double>(width) / info.image_width;
  const double sy = static_cast<double>(height) / info.image_height;
  // The resampling filter reads up to its support (the shrink factor) plus a pixel beyond the region.
  const int margin =
      static_cast<int>(std::ceil(std::max(region.width * sx, region.height * sy) / out_size)) + 2;
  const int x0 = std::max(0, static_cast<int>(std::floor(region.x * sx)) - margin);
  const int x1 = std::min(width, static_cast<int>(std::ceil((region.x + region.width) * sx)) + margin);
  const int y0 = std::max(0, static_cast<int>(std::floor(region.y * sy)) - margin);
  const int y1 = std::min(height, static_cast<int>(std::ceil((region.y + region.height) * sy)) + margin);
  JDIMENSION crop_x = static_cast<JDIMENSION>(x0), crop_width = static_cast<JDIMENSION>(x1 - x0);
  jpeg_crop_scanline(&info, &crop_x, &crop_width);  // widens to iMCU boundaries
  jpeg_skip_scanlines(&info, static_cast<JDIMENSION>(y0));
  result.image.width = static_cast<int>(info.output_width);  // the cropped width
  result.image.height = y1 - y0;
  result.image.channels = channels;
  result.image.pixels.resize(static_cast<std::size_t>(result.image.width) * result.image.height * channels);
  thread_local std::vector<std::uint8_t> cmyk_row;  // static storage: nothing for longjmp to skip
  if (cmyk) cmyk_row.resize(static_cast<std::size_t>(result.image.width) * 4);
  for (int y = 0; y < result.image.height; ++y) {
    JSAMPROW row = cmyk ? cmyk_row.data() : result.image.row(y);
    jpeg_read_scanlines(&info, &row, 1);
    if (cmyk) {
      inverted_cmyk_to(row, static_cast<std::size_t>(result.image.width), channels, result.image.row(y));
    }
  }
  jpeg_destroy_decompress(&info);  // rows below the region are never decoded
  result.box = {region.x * sx - crop_x, region.y * sy - y0, region.width * sx, region.height * sy};
}

}  // namespace

void decode_for_resample(std::string_view bytes, const std::string& name, int channels, const Box& region,
                         int out_size, DecodedRegion& out) {
  if (sniff_image(bytes) == ImageType::jpeg) {
    decode_jpeg_region(bytes, name, channels, region, out_size, out);
  } else {
    out = {decode_image(bytes, name, channels), region};
  }
}

ImageType sniff_image(std::string_view bytes) {
  if (bytes.substr(0, png_signature.size()) == png_signature) return ImageType::png;
  if (bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
      static_cast<unsigned char>(bytes[1]) == 0xD8 && static_cast<unsigned char>(bytes[2]) == 0xFF) {
    return ImageType::jpeg;
  }
  return ImageType::unknown;
}

bool has_image_extension(const std::filesystem::path& path) {
  // On the string rather than path::extension(): called for every file of a listing.
  const std::string& name = path.native();
  const std::size_t dot = name.rfind('.');
  if (dot == std::string::npos || name.find('/', dot) != std::string::npos || dot == 0 || name[dot - 1] == '/') {
    return false;
  }
  std::string extension = name.substr(dot);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".png" || extension == ".jpg" || extension == ".jpeg";
}

ImageSize read_image_size(std::string_view bytes, const std::string& name) {
  switch (sniff_image(bytes)) {
    case ImageType::png: {
      png_image png;
      std::memset(&png, 0, sizeof png);
      png.version = PNG_IMAGE_VERSION;
      if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
        fail(ExitCode::data, "{}: not a readable PNG: {}", name, png.message);
      }
      png_image_free(&png);
      return {static_cast<int>(png.width), static_cast<int>(png.height)};
    }
    case ImageType::jpeg: {
      tjhandle handle = decompressor();
      int width = 0, height = 0, subsampling = 0, colorspace = 0;
      if (tjDecompressHeader3(handle, jpeg_data(bytes), bytes.size(), &width, &height, &subsampling,
                              &colorspace) != 0) {
        fail(ExitCode::data, "{}: not a readable JPEG: {}", name, tjGetErrorStr2(handle));
      }
      return {width, height};
    }
    case ImageType::unknown:
      break;
  }
  fail(ExitCode::data, "{}: neither PNG nor JPEG", name);
}

Image decode_image(std::string_view bytes, const std::string& name, int channels) {
  switch (sniff_image(bytes)) {
    case ImageType::png:
      return decode_png(bytes, name, channels);
    case ImageType::jpeg:
      return decode_jpeg(bytes, name, channels);
    case ImageType::unknown:
      break;
  }
  fail(ExitCode::data, "{}: neither PNG nor JPEG", name);
}

void write_png(const std::filesystem::path& path, const Image& image) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&png, path.c_str(), 0, image.pixels.data(), 0, nullptr)) {
    fail(ExitCode::output, "{}: cannot write PNG: {}", path.string(), png.message);
  }
}

std::string encode_jpeg(const Image& image, int quality) {
  thread_local TurboHandle turbo(true);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  if (tjCompress2(turbo.handle, image.pixels.data(), image.width, 0, image.height,
                  image.channels == 1 ? TJPF_GRAY : TJPF_RGB, &buffer, &size,
                  image.channels == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0) != 0) {
    fail(ExitCode::output, "cannot encode a {}x{} image of {} channel(s) as JPEG: {}", image.width, image.height,
         image.channels, tjGetErrorStr2(turbo.handle));
  }
  std::unique_ptr<unsigned char, decltype(&tjFree)> owned(buffer, &tjFree);
  return std::string(reinterpret_cast<const char*>(buffer), size);
}

void write_jpeg(const std::filesystem::path& path, const Image& image, int quality) {
  std::string bytes;
  try {
    bytes = encode_jpeg(image, quality);
  } catch (const Error&) {
    rethrow_as(ExitCode::output, "{}", path.string());
  }
  write_file_atomic(path, bytes);
}

}  // namespace tp::data
