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
#include "spec/spec.h"

namespace tp::data {

// The training and validation images as datasets (the spec's transforms, targets, classes) and their schema.
Datasets open_images(const spec::DataSpec& spec, std::uint64_t seed,
                     const std::shared_ptr<const FileStore>& store,
                     std::pair<LabelledImages, LabelledImages> train_and_valid);

}  // namespace tp::data
