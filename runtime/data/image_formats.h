// What the image formats share: images with their targets, the hold-out split, and opening them as
// datasets. Internal to tp_data.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/file_store.h"
#include "spec/spec.h"

namespace tp::data {

// Image files, each with its target (a class index, a float, or a multi-hot row), and the class names.
struct LabelledImages {
  std::vector<std::filesystem::path> files;
  at::Tensor targets;
  std::vector<std::string> classes;
  std::filesystem::path root;  // the folder the samples are named relative to (Dataset::sample_name)
};

// A seeded `fraction` of `all` as validation, the rest for training.
std::pair<LabelledImages, LabelledImages> hold_out(const LabelledImages& all, double fraction,
                                                   std::uint64_t seed);

// The training and validation images as datasets (the spec's transforms, targets, classes) and their schema.
Datasets open_images(const spec::DataSpec& spec, std::uint64_t seed,
                     const std::shared_ptr<const FileStore>& store,
                     std::pair<LabelledImages, LabelledImages> train_and_valid);

}  // namespace tp::data
