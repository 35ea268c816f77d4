#include "data/labelled_images.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/error.h"

namespace tp::data {

namespace fs = std::filesystem;

std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_indices(std::size_t n,
                                                                            double valid_fraction,
                                                                            std::uint64_t seed) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 generator(seed ^ 0x5eed5ba11ULL);
  std::shuffle(order.begin(), order.end(), generator);
  const auto valid_count = static_cast<std::size_t>(std::llround(static_cast<double>(n) * valid_fraction));
  std::vector<std::size_t> valid(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(valid_count));
  std::vector<std::size_t> train(order.begin() + static_cast<std::ptrdiff_t>(valid_count), order.end());
  std::sort(valid.begin(), valid.end());
  std::sort(train.begin(), train.end());
  return {train, valid};
}

std::pair<LabelledImages, LabelledImages> hold_out(const LabelledImages& all, double fraction,
                                                   std::uint64_t seed) {
  const auto [train_indices, valid_indices] = split_indices(all.files.size(), fraction, seed);
  const std::size_t width = all.target_width();
  const auto take = [&](const std::vector<std::size_t>& indices) {
    LabelledImages part;
    part.kind = all.kind;
    part.classes = all.classes;
    part.root = all.root;
    for (const std::size_t i : indices) {
      part.files.push_back(all.files[i]);
      const auto row = all.targets.begin() + static_cast<std::ptrdiff_t>(i * width);
      part.targets.insert(part.targets.end(), row, row + static_cast<std::ptrdiff_t>(width));
    }
    return part;
  };
  return {take(train_indices), take(valid_indices)};
}

std::pair<LabelledImages, LabelledImages> labelled_images(const spec::DataSpec& spec, const fs::path& root,
                                                          std::uint64_t seed, const FileStore& store) {
  switch (spec.format) {
    case spec::DataFormat::image_folder:
      return image_folder_split(spec, root, seed, store);
    case spec::DataFormat::image_csv:
      return image_csv_split(spec, root, seed);
    case spec::DataFormat::table_csv:
    case spec::DataFormat::shards:
      fail(ExitCode::usage, "--format {}: packing takes image_folder or image_csv data (a table is read "
           "whole into memory and gains nothing from shards)", spec::name(spec.format));
  }
  spec::unhandled(spec.format);
}

}  // namespace tp::data
