// What the image formats share: their images (data/labelled_images.h) opened as datasets. Internal to
// tp_data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/file_store.h"
#include "data/labelled_images.h"
#include "data/transform.h"
#include "spec/spec.h"

namespace tp::data {

// The training and validation images as datasets (the spec's transforms, targets, classes) and their schema.
Datasets open_images(const spec::DataSpec& spec, std::uint64_t seed,
                     const std::shared_ptr<const FileStore>& store,
                     std::pair<LabelledImages, LabelledImages> train_and_valid);

// The targets as training reads them: class indices (long), else floats, a row each for multi-hot targets.
at::Tensor target_tensor(const LabelledImages& images);

// Image files read through `store` and made into inputs by `transform` (a random crop and flip depend on
// (seed, epoch, index)), each with its row of `targets`. A bad file is reported to `bad_files` and the next
// file takes its place.
std::shared_ptr<const Dataset> image_dataset(std::shared_ptr<const FileStore> store,
                                             std::vector<std::filesystem::path> files, std::filesystem::path root,
                                             at::Tensor targets, ImageTransform transform, int channels,
                                             std::uint64_t seed, std::shared_ptr<BadFiles> bad_files);

}  // namespace tp::data
