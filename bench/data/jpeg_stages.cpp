// Where a JPEG decode's CPU time goes, stage by stage, over the JPEGs of a folder held in memory:
// libjpeg-turbo decoding each whole image up to entropy decoding only, then with the inverse DCT, chroma
// upsampling and colour conversion, against trainpoint's decode of a random resized crop
// (data::decode_for_resample) and a raw YCbCr decode down to the same crop's bottom edge (raw output cannot
// skip rows or crop columns). Prints a Markdown table of median CPU seconds over alternating rounds. Not a
// test.
#include <algorithm>
#include <cstddef>
#include <cstdio>  // jpeglib.h needs size_t and FILE declared first
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "data/image.h"
#include "data/transform.h"
#include "measure/cpu_time.h"

namespace {

struct Sample {
  std::string bytes;
  tp::data::Box crop;  // the training transform's random resized crop, as the loader draws it
};

// libjpeg's default error handler exits the process; these files are the benchmark's own, so that is enough.
class Decompressor {
 public:
  explicit Decompressor(const std::string& bytes) {
    info_.err = jpeg_std_error(&errors_);
    jpeg_create_decompress(&info_);
    jpeg_mem_src(&info_, reinterpret_cast<const unsigned char*>(bytes.data()),
                 static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&info_, TRUE);
  }
  ~Decompressor() { jpeg_destroy_decompress(&info_); }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
  jpeg_decompress_struct* operator->() { return &info_; }
  jpeg_decompress_struct* get() { return &info_; }

 private:
  jpeg_decompress_struct info_{};
  jpeg_error_mgr errors_{};
};

// Scanlines of the whole image in `color_space`.
void decode_scanlines(const Sample& sample, J_COLOR_SPACE color_space, std::vector<unsigned char>& pixels) {
  Decompressor info(sample.bytes);
  info->out_color_space = color_space;
  jpeg_start_decompress(info.get());
  pixels.resize(static_cast<std::size_t>(info->output_width) * info->output_components);
  JSAMPROW row = pixels.data();
  while (info->output_scanline < info->output_height) jpeg_read_scanlines(info.get(), &row, 1);
}

// Raw component planes (no upsampling, no colour conversion) down to row `end_row`.
void decode_raw(const Sample& sample, JDIMENSION end_row, std::vector<unsigned char>& pixels) {
  Decompressor info(sample.bytes);
  info->raw_data_out = TRUE;
  jpeg_start_decompress(info.get());
  const int rows = info->max_v_samp_factor * DCTSIZE;  // one iMCU row per call
  const std::size_t stride = static_cast<std::size_t>(info->output_width) + 2 * DCTSIZE;
  pixels.resize(stride * rows * info->num_components);
  std::vector<JSAMPROW> row_pointers(static_cast<std::size_t>(rows) * info->num_components);
  std::vector<JSAMPARRAY> planes(static_cast<std::size_t>(info->num_components));
  for (int c = 0; c < info->num_components; ++c) {
    planes[c] = &row_pointers[static_cast<std::size_t>(c) * rows];
    for (int r = 0; r < rows; ++r) planes[c][r] = &pixels[(static_cast<std::size_t>(c) * rows + r) * stride];
  }
  end_row = std::min(end_row, info->output_height);
  while (info->output_scanline < end_row) jpeg_read_raw_data(info.get(), planes.data(), rows);
}

std::vector<Sample> load(const std::filesystem::path& dir, int out_size) {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && tp::data::has_image_extension(entry.path())) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  tp::data::ImageTransform transform;
  transform.size = out_size;
  transform.random_resized_crop = true;
  std::vector<Sample> samples;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    std::ifstream file(paths[i], std::ios::binary);
    Sample sample{{std::istreambuf_iterator<char>(file), {}}, {}};
    if (tp::data::sniff_image(sample.bytes) != tp::data::ImageType::jpeg) continue;
    std::mt19937_64 generator = tp::data::sample_generator(1, 0, i);
    sample.crop =
        tp::data::place(transform, tp::data::read_image_size(sample.bytes, paths[i].string()), generator).box;
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tp-bench-jpeg-stages DIR [ROUNDS]\n";
    return 2;
  }
  const int rounds = argc > 2 ? std::max(1, std::stoi(argv[2])) : 3;
  constexpr int out_size = 224;
  const std::vector<Sample> samples = load(argv[1], out_size);
  if (samples.empty()) {
    std::cerr << "tp-bench-jpeg-stages: no JPEG under " << argv[1] << "\n";
    return 2;
  }
  std::vector<unsigned char> pixels;
  tp::data::DecodedRegion region;
  struct Stage {
    const char* name;
    std::function<void(const Sample&)> decode;
    std::vector<double> seconds;
  };
  std::vector<Stage> stages{
      {"whole image: entropy decoding only (jpeg_read_coefficients)",
       [](const Sample& sample) {
         Decompressor info(sample.bytes);
         jpeg_read_coefficients(info.get());
       },
       {}},
      {"whole image: + inverse DCT (raw YCbCr planes)",
       [&](const Sample& sample) { decode_raw(sample, JPEG_MAX_DIMENSION, pixels); },
       {}},
      {"whole image: + chroma upsampling (YCbCr pixels)",
       [&](const Sample& sample) { decode_scanlines(sample, JCS_YCbCr, pixels); },
       {}},
      {"whole image: + colour conversion (RGB pixels, as PIL decodes)",
       [&](const Sample& sample) { decode_scanlines(sample, JCS_RGB, pixels); },
       {}},
      {"the crop, as trainpoint decodes it (RGB, rows and iMCU columns of the crop)",
       [&](const Sample& sample) {
         tp::data::decode_for_resample(sample.bytes, "sample", 3, sample.crop, out_size, region);
       },
       {}},
      {"raw YCbCr planes down to the crop's bottom edge (every column)",
       [&](const Sample& sample) {
         decode_raw(sample, static_cast<JDIMENSION>(sample.crop.y + sample.crop.height) + 2, pixels);
       },
       {}},
  };
  for (int round = 0; round < rounds; ++round) {
    for (Stage& stage : stages) {
      const double start = tp::bench::process_cpu_seconds();
      for (const Sample& sample : samples) stage.decode(sample);
      stage.seconds.push_back(tp::bench::process_cpu_seconds() - start);
    }
  }
  std::cout << "| " << samples.size() << " JPEGs, median of " << rounds
            << " rounds | CPU s | ms per image |\n|---|---:|---:|\n";
  for (Stage& stage : stages) {
    std::nth_element(stage.seconds.begin(), stage.seconds.begin() + rounds / 2, stage.seconds.end());
    const double median = stage.seconds[static_cast<std::size_t>(rounds / 2)];
    std::cout << "| " << stage.name << " | " << median << " | " << median * 1000 / samples.size() << " |\n";
  }
  return 0;
}
