// What the image formats share: images with their targets, the hold-out split, and opening them as
// datasets. Internal to tp_data.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spec/spec.h"

namespace tp::data {

struct LabelledImages {
  std::vector<std::filesystem::path> files;
  at::Tensor targets;
  std::vector<std::string> classes;
};

// image_folder: one subdirectory per class, `files` the files under `dir`. `known_classes` (validation data)
// fixes the class indices.
LabelledImages list_image_folder(const std::vector<std::filesystem::path>& files,
                                 const std::filesystem::path& dir,
                                 const std::vector<std::string>* known_classes);

// fastai's layout: `dir` holds train/ and valid/ (or val/), each with one folder per class; they are the
// training and validation split. Returns the two folders when `files` (those under `dir`) are laid out so.
std::optional<std::pair<std::filesystem::path, std::filesystem::path>> split_folders(
    const std::vector<std::filesystem::path>& files, const std::filesystem::path& dir);

// The files of `files` under `dir`.
std::vector<std::filesystem::path> files_under(const std::vector<std::filesystem::path>& files,
                                               const std::filesystem::path& dir);

// image_csv: the first column is an image path relative to the CSV, `target` the label column.
LabelledImages read_image_csv(const std::filesystem::path& file, const spec::DataSpec& spec,
                              const std::vector<std::string>* known_classes);

// A seeded `fraction` of `all` as validation, the rest for training.
std::pair<LabelledImages, LabelledImages> hold_out(const LabelledImages& all, double fraction,
                                                   std::uint64_t seed);

}  // namespace tp::data
