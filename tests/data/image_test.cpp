// Decoding (PNG, JPEG with DCT scaling), channel conversion and the crop/resample/normalize pass.
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <png.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>

#include "common/error.h"
#include "common/files.h"
#include "data/csv.h"
#include "data/image.h"
#include "data/transform.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::data {
namespace {

using tp::testing::TempDir;
using tp::testing::write_text;

// A busy test pattern: gradients plus noise, so every decoder detail shows.
Image pattern(int width, int height, int channels, unsigned seed) {
  std::mt19937 random(seed);
  Image image{width, height, channels,
              std::vector<std::uint8_t>(static_cast<std::size_t>(width) * height * channels)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        image.row(y)[x * channels + c] =
            static_cast<std::uint8_t>((x * 7 + y * 3 + c * 50 + random() % 40) % 256);
      }
    }
  }
  return image;
}

// libjpeg-turbo's own decoder, through its libjpeg API (not TurboJPEG).
Image reference_jpeg(const std::string& bytes, int channels, unsigned scale_num, unsigned scale_denom) {
  jpeg_decompress_struct info;
  jpeg_error_mgr errors;
  info.err = jpeg_std_error(&errors);
  jpeg_create_decompress(&info);
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(&info, TRUE);
  info.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  info.scale_num = scale_num;
  info.scale_denom = scale_denom;
  jpeg_start_decompress(&info);
  Image image{static_cast<int>(info.output_width), static_cast<int>(info.output_height), channels, {}};
  image.pixels.resize(static_cast<std::size_t>(image.width) * image.height * channels);
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = image.row(static_cast<int>(info.output_scanline));
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return image;
}

TEST(Png, RoundTripIsExact) {
  TempDir dir;
  for (int channels : {1, 3}) {
    const Image original = pattern(37, 23, channels, 1);
    write_png(dir / "a.png", original);
    const Image decoded = decode_image(read_file(dir / "a.png", ExitCode::data), "a.png", channels);
    EXPECT_EQ(decoded.width, 37);
    EXPECT_EQ(decoded.height, 23);
    EXPECT_EQ(decoded.pixels, original.pixels) << channels << " channels";
  }
}

TEST(Png, ConvertsGrayRgbAndAlphaLikePil) {
  TempDir dir;
  // An RGBA file written with libpng directly.
  std::vector<std::uint8_t> rgba = {10, 20, 30, 0, 200, 100, 50, 255, 228, 21, 193, 255};
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = 3;
  png.height = 1;
  png.format = PNG_FORMAT_RGBA;
  ASSERT_TRUE(png_image_write_to_file(&png, (dir / "rgba.png").c_str(), 0, rgba.data(), 0, nullptr));
  const std::string bytes = read_file(dir / "rgba.png", ExitCode::data);
  EXPECT_EQ(decode_image(bytes, "rgba.png", 3).pixels,
            (std::vector<std::uint8_t>{10, 20, 30, 200, 100, 50, 228, 21, 193}));
  // PIL's L, (19595 R + 38470 G + 7471 B + 32768) >> 16: the third pixel is 102 in PIL (Debian's 9.4), where
  // (299 R + 587 G + 114 B) / 1000 rounds to 103.
  EXPECT_EQ(decode_image(bytes, "rgba.png", 1).pixels, (std::vector<std::uint8_t>{18, 124, 102}));
  write_png(dir / "gray.png", Image{2, 1, 1, {7, 9}});
  EXPECT_EQ(decode_image(read_file(dir / "gray.png", ExitCode::data), "gray.png", 3).pixels,
            (std::vector<std::uint8_t>{7, 7, 7, 9, 9, 9}));
}

TEST(Jpeg, DecodeEqualsLibjpegTurbo) {
  TempDir dir;
  write_jpeg(dir / "a.jpg", pattern(203, 157, 3, 2), 85);
  const std::string bytes = read_file(dir / "a.jpg", ExitCode::data);
  for (int channels : {1, 3}) {
    const Image decoded = decode_image(bytes, "a.jpg", channels);
    const Image expected = reference_jpeg(bytes, channels, 1, 1);
    ASSERT_EQ(decoded.width, 203);
    ASSERT_EQ(decoded.height, 157);
    EXPECT_EQ(decoded.pixels, expected.pixels) << channels << " channels";
  }
}

TEST(Jpeg, DecodesAtTheSmallestSimdScaleThatKeepsTheCrop) {
  TempDir dir;
  write_jpeg(dir / "a.jpg", pattern(500, 376, 3, 3), 90);
  const std::string bytes = read_file(dir / "a.jpg", ExitCode::data);
  DecodedRegion part;
  decode_for_resample(bytes, "a.jpg", 3, Box{0, 0, 500, 376}, 32, part);  // 1/8 is enough
  EXPECT_EQ(part.image.width, 63);
  EXPECT_EQ(part.image.height, 47);
  EXPECT_EQ(part.image.pixels, reference_jpeg(bytes, 3, 1, 8).pixels);
  EXPECT_DOUBLE_EQ(part.box.width, 63);
  // 5/8 would keep 300 pixels, but only 1/8, 1/4 and 1/2 have SIMD inverse DCTs: full size.
  decode_for_resample(bytes, "a.jpg", 3, Box{0, 0, 500, 376}, 300, part);
  EXPECT_EQ(part.image.width, 500);
  EXPECT_EQ(part.image.pixels, reference_jpeg(bytes, 3, 1, 1).pixels);
}

TEST(Jpeg, CroppedDecodeResamplesLikeTheFullDecode) {
  TempDir dir;
  write_jpeg(dir / "a.jpg", pattern(500, 376, 3, 6), 90);
  const std::string bytes = read_file(dir / "a.jpg", ExitCode::data);
  const Box region{137.3, 91.0, 200, 150};
  // 64 / 150 needs a scale of at least 0.43: 1/2, so the full reference is the 250x188 decode.
  DecodedRegion part;
  decode_for_resample(bytes, "a.jpg", 3, region, 64, part);
  EXPECT_LT(part.image.width, 250);
  EXPECT_LT(part.image.height, 188);
  EXPECT_DOUBLE_EQ(part.box.width, 100);
  const Image full = reference_jpeg(bytes, 3, 1, 2);
  ASSERT_EQ(full.width, 250);
  std::vector<float> cropped(3 * 64 * 64), reference(3 * 64 * 64);
  resample_normalized(part.image, part.box, 64, true, Normalization::unit(), cropped.data());
  resample_normalized(full, Box{region.x / 2, region.y / 2, 100, 75}, 64, true, Normalization::unit(),
                      reference.data());
  for (std::size_t i = 0; i < cropped.size(); ++i) ASSERT_NEAR(cropped[i], reference[i], 1e-5) << i;
  EXPECT_THROW(decode_for_resample(bytes.substr(0, 30), "a.jpg", 3, region, 64, part), Error);
}

// A four-channel JPEG through libjpeg's compressor: CMYK stored as CMYK or as YCCK (with an Adobe marker).
void write_cmyk_jpeg(const std::filesystem::path& path, const Image& cmyk, J_COLOR_SPACE stored_as) {
  jpeg_compress_struct info;
  jpeg_error_mgr errors;
  info.err = jpeg_std_error(&errors);
  jpeg_create_compress(&info);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&info, &buffer, &size);
  info.image_width = static_cast<JDIMENSION>(cmyk.width);
  info.image_height = static_cast<JDIMENSION>(cmyk.height);
  info.input_components = 4;
  info.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&info);
  jpeg_set_colorspace(&info, stored_as);
  jpeg_set_quality(&info, 90, TRUE);
  jpeg_start_compress(&info, TRUE);
  while (info.next_scanline < info.image_height) {
    JSAMPROW row = const_cast<std::uint8_t*>(cmyk.row(static_cast<int>(info.next_scanline)));
    jpeg_write_scanlines(&info, &row, 1);
  }
  jpeg_finish_compress(&info);
  jpeg_destroy_compress(&info);
  write_text(path, std::string(reinterpret_cast<const char*>(buffer), size));
  std::free(buffer);
}

TEST(Jpeg, CmykAndYcckDecodeLikePil) {
  TempDir dir;
  const Image cmyk = pattern(61, 43, 4, 9);
  write_cmyk_jpeg(dir / "cmyk.jpg", cmyk, JCS_CMYK);
  write_cmyk_jpeg(dir / "ycck.jpg", cmyk, JCS_YCCK);
  // Debian's PIL, which torchvision's ImageFolder uses: its RGB and L conversions of each file.
  write_text(dir / "convert.py",
             "import sys\n"
             "from PIL import Image\n"
             "for name in sys.argv[1:]:\n"
             "    image = Image.open(name)\n"
             "    assert image.mode == 'CMYK', image.mode\n"
             "    open(name + '.rgb', 'wb').write(image.convert('RGB').tobytes())\n"
             "    open(name + '.l', 'wb').write(image.convert('L').tobytes())\n");
  testing::run_checked("/usr/bin/python3 " + (dir / "convert.py").string() + " " +
                       (dir / "cmyk.jpg").string() + " " + (dir / "ycck.jpg").string());
  for (const char* name : {"cmyk.jpg", "ycck.jpg"}) {
    const std::string bytes = read_file(dir / name, ExitCode::data);
    for (int channels : {1, 3}) {
      const std::string pil =
          read_file(dir / (std::string(name) + (channels == 1 ? ".l" : ".rgb")), ExitCode::data);
      const Image decoded = decode_image(bytes, name, channels);
      ASSERT_EQ(decoded.width, 61);
      ASSERT_EQ(decoded.height, 43);
      EXPECT_EQ(std::string(decoded.pixels.begin(), decoded.pixels.end()), pil) << name << ", " << channels;
      // The cropped decode of a region gives the same pixels over the region and the pixel around it that the
      // filter reads (its own edges, where libjpeg upsamples the subsampled YCCK channels without the
      // neighbours, are margin).
      const Box region{20.5, 9, 30, 21};
      DecodedRegion part;
      decode_for_resample(bytes, name, channels, region, 30, part);
      const int left = static_cast<int>(region.x - part.box.x), top = static_cast<int>(region.y - part.box.y);
      ASSERT_GT(left, 0);
      ASSERT_GT(top, 0);
      const std::size_t width = static_cast<std::size_t>(region.width + 3) * channels;  // from x = 19 to 52
      for (int y = 8; y <= 31; ++y) {
        const std::size_t offset = (static_cast<std::size_t>(y) * 61 + 19) * channels;
        const std::uint8_t* decoded_row = part.image.row(y - top) + (19 - left) * channels;
        ASSERT_EQ(std::string(decoded_row, decoded_row + width), pil.substr(offset, width))
            << name << ", " << channels << " channels, row " << y;
      }
    }
  }
}

TEST(Decode, CorruptedFilesAreDataErrorsNamingTheFile) {
  TempDir dir;
  write_jpeg(dir / "a.jpg", pattern(64, 64, 3, 4), 90);
  write_png(dir / "a.png", pattern(64, 64, 3, 4));
  for (const char* name : {"a.jpg", "a.png"}) {
    const std::string bytes = read_file(dir / name, ExitCode::data);
    std::string truncated = bytes.substr(0, bytes.size() / 2);
    try {
      decode_image(truncated, name, 3);
      // libjpeg-turbo fills a truncated JPEG's missing rows with a warning; it must at least decode fully.
      EXPECT_EQ(std::string(name), "a.jpg");
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::data);
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
    std::string garbage = bytes.substr(0, 20) + std::string(200, 'x');
    EXPECT_THROW(decode_image(garbage, name, 3), Error) << name;
  }
  try {
    decode_image("GIF89a....", "x.gif", 3);
    FAIL();
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "x.gif: neither PNG nor JPEG");
  }
}

TEST(Transform, WholeImageAtTheSameSizeIsExact) {
  const Image image = pattern(16, 16, 3, 5);
  std::vector<float> out(3 * 16 * 16);
  resample_normalized(image, Box{0, 0, 16, 16}, 16, false, Normalization::unit(), out.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 16; ++x) {
        EXPECT_FLOAT_EQ(out[(c * 16 + y) * 16 + x], image.row(y)[x * 3 + c] / 255.f);
      }
    }
  }
  // Flipped, and normalized.
  const Normalization imagenet = Normalization::imagenet(3);
  resample_normalized(image, Box{0, 0, 16, 16}, 16, true, imagenet, out.data());
  EXPECT_NEAR(out[(1 * 16 + 2) * 16 + 15], (image.row(2)[0 * 3 + 1] / 255.f - 0.456f) / 0.224f, 1e-5);
}

// PIL's bilinear resize of `box` (Debian's python3-pil, which torchvision's transforms use) as 0-255 values,
// rows x columns x channels.
std::vector<int> pil_resize(const Image& image, const Box& box, int out_size, bool flip) {
  TempDir dir;
  write_text(dir / "pixels", std::string(image.pixels.begin(), image.pixels.end()));
  const std::string script = fmt::format(
      "import sys\n"
      "from PIL import Image\n"
      "image = Image.frombytes('{}', ({}, {}), open(sys.argv[1], 'rb').read())\n"
      "out = image.resize(({}, {}), Image.BILINEAR, box=({}, {}, {}, {}))\n"
      "if {}: out = out.transpose(Image.FLIP_LEFT_RIGHT)\n"
      "sys.stdout.write(' '.join(map(str, out.tobytes())))\n",
      image.channels == 1 ? "L" : "RGB", image.width, image.height, out_size, out_size, box.x, box.y,
      box.x + box.width, box.y + box.height, flip ? "True" : "False");
  write_text(dir / "resize.py", script);
  const std::string output = testing::run_checked(
      "/usr/bin/python3 " + (dir / "resize.py").string() + " " + (dir / "pixels").string());
  std::vector<int> values;
  std::istringstream in(output);
  for (int value; in >> value;) values.push_back(value);
  return values;
}

TEST(Transform, MatchesPilsBilinearResize) {
  struct Case {
    int channels;
    Box box;
    int out_size;
    bool flip;
  };
  const Case cases[] = {
      {3, {0, 0, 97, 61}, 24, false},           // the whole image, shrunk
      {3, {3.5, 2, 80, 55}, 50, false},         // shrunk less than 2x, as most random crops to 224
      {3, {1, 1, 60, 59}, 41, true},            // the same with an odd size (rows are filtered in pairs)
      {3, {0, 0, 97, 61}, 45, false},           // shrunk 2-3x
      {3, {10.5, 3.25, 70.4, 50.1}, 32, true},  // a fractional box, shrunk and mirrored
      {3, {40, 20, 9, 13}, 31, false},          // a small box, enlarged
      {3, {0, 30, 97, 31}, 16, true},           // a wide strip at the bottom edge
      {1, {5.5, 0, 60, 61}, 20, false},         // grayscale
  };
  for (const Case& c : cases) {
    const Image image = pattern(97, 61, c.channels, 11);
    std::vector<float> ours(static_cast<std::size_t>(c.channels) * c.out_size * c.out_size);
    resample_normalized(image, c.box, c.out_size, c.flip, Normalization::unit(), ours.data());
    const std::vector<int> pil = pil_resize(image, c.box, c.out_size, c.flip);
    ASSERT_EQ(pil.size(), ours.size());
    // PIL rounds to 8 bits after each of its two passes and uses fixed-point weights: at most a level apart.
    double worst = 0;
    for (int y = 0; y < c.out_size; ++y) {
      for (int x = 0; x < c.out_size; ++x) {
        for (int ch = 0; ch < c.channels; ++ch) {
          const float mine = 255.f * ours[(static_cast<std::size_t>(ch) * c.out_size + y) * c.out_size + x];
          const int theirs = pil[(static_cast<std::size_t>(y) * c.out_size + x) * c.channels + ch];
          worst = std::max(worst, std::abs(static_cast<double>(mine) - theirs));
        }
      }
    }
    EXPECT_LE(worst, 1.01) << "box " << c.box.x << "," << c.box.y << " " << c.box.width << "x" << c.box.height
                           << " to " << c.out_size << (c.flip ? " flipped" : "");
  }
}

TEST(Transform, DownscalingAveragesLikeAnAreaFilter) {
  // A 1-pixel checkerboard shrunk 4x must come out flat gray, not aliased.
  Image image{64, 64, 1, std::vector<std::uint8_t>(64 * 64)};
  for (int y = 0; y < 64; ++y) {
    for (int x = 0; x < 64; ++x) image.row(y)[x] = (x + y) % 2 ? 255 : 0;
  }
  std::vector<float> out(16 * 16);
  resample_normalized(image, Box{0, 0, 64, 64}, 16, false, Normalization::unit(), out.data());
  for (float v : out) EXPECT_NEAR(v, 0.5f, 0.05f);
}

TEST(Transform, RandomChoicesDependOnlyOnSeedEpochAndIndex) {
  ImageTransform transform;
  transform.size = 224;
  transform.random_resized_crop = true;
  transform.flip = true;
  const ImageSize size{500, 375};
  const auto placement = [&](std::uint64_t seed, std::int64_t epoch, std::uint64_t index) {
    auto generator = sample_generator(seed, epoch, index);
    return place(transform, size, generator);
  };
  int flips = 0;
  for (std::uint64_t i = 0; i < 200; ++i) {
    const Placement a = placement(1, 3, i), b = placement(1, 3, i);
    EXPECT_EQ(a.box.x, b.box.x);
    EXPECT_EQ(a.box.width, b.box.width);
    EXPECT_EQ(a.flip, b.flip);
    EXPECT_GE(a.box.x, 0);
    EXPECT_LE(a.box.x + a.box.width, 500);
    EXPECT_LE(a.box.y + a.box.height, 375);
    const double area = a.box.width * a.box.height / (500.0 * 375.0);
    EXPECT_GE(area, 0.07);
    flips += a.flip;
  }
  EXPECT_GT(flips, 60);
  EXPECT_LT(flips, 140);
  EXPECT_NE(placement(1, 3, 0).box.x + placement(1, 3, 0).box.width,
            placement(1, 4, 0).box.x + placement(1, 4, 0).box.width);
  transform.random_resized_crop = false;
  transform.crop_to_square = true;
  const Placement center = placement(1, 0, 0);
  EXPECT_EQ(center.box.x, 62.5);
  EXPECT_EQ(center.box.width, 375);
}

TEST(Csv, QuotesAndLineNumbers) {
  TempDir dir;
  write_text(dir / "a.csv", "name,value\n\"a, b\",1\n\n\"multi\nline\",2\nc,3\n");
  const CsvTable table = read_csv(dir / "a.csv");
  ASSERT_EQ(table.rows.size(), 3u);
  EXPECT_EQ(table.rows[0][0], "a, b");
  EXPECT_EQ(table.rows[1][0], "multi\nline");
  EXPECT_EQ(table.lines[2], 6u);
  write_text(dir / "b.csv", "x,y\n1,2\n3\n");
  try {
    read_csv(dir / "b.csv");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("b.csv:3: 1 cells, but the header has 2 columns"),
              std::string::npos)
        << error.what();
  }
  // An unclosed quote takes the rest of the file: the error names the line where its record starts.
  write_text(dir / "c.csv", "x,y\n1,2\n\n\"3,4\n5,6\n7,8\n");
  try {
    read_csv(dir / "c.csv");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("c.csv:4: malformed CSV: a quoted field in the record starting here is not closed"),
              std::string::npos)
        << error.what();
  }
  write_text(dir / "d.csv", "");
  EXPECT_THROW(read_csv(dir / "d.csv"), Error);
}

}  // namespace
}  // namespace tp::data
