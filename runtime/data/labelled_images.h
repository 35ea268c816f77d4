// The image files of an image_folder or image_csv source with their labels, split into training and
// validation as training splits them: what the image formats open (data/image_formats.h makes the tensors)
// and what `trainpoint pack` packs. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "data/csv.h"
#include "data/file_store.h"
#include "spec/spec.h"

namespace tp::data {

// What a target is: a class index, a number (regression), or a multi-hot row over the classes (multi_label).
enum class TargetKind { class_index, number, multi_hot };

// Image files, each with its target, and the class names.
struct LabelledImages {
  std::vector<std::filesystem::path> files;
  // One number a file (a class index or a regression target) or, multi_hot, one row of classes.size() zeros
  // and ones, as training reads them (float: class indices are exact below 2^24).
  std::vector<float> targets;
  TargetKind kind = TargetKind::class_index;
  std::vector<std::string> classes;
  std::filesystem::path root;  // the folder the samples are named relative to (Dataset::sample_name)

  // The numbers of one file's target.
  std::size_t target_width() const { return kind == TargetKind::multi_hot ? classes.size() : 1; }
};

// Splits [0, n) into a training and a validation part: a seeded shuffle, then the first
// round(n * valid_fraction) indices are validation. Both parts are returned sorted.
std::pair<std::vector<std::size_t>, std::vector<std::size_t>> split_indices(std::size_t n,
                                                                            double valid_fraction,
                                                                            std::uint64_t seed);

// A seeded `fraction` of `all` as validation, the rest for training.
std::pair<LabelledImages, LabelledImages> hold_out(const LabelledImages& all, double fraction,
                                                   std::uint64_t seed);

// The training and validation images of an image_folder or image_csv source: data.valid_source, else
// (image_folder) fastai's train/ and valid/ folders, else a held-out data.valid share of data.source. Throws
// tp::Error(usage) for another format.
std::pair<LabelledImages, LabelledImages> labelled_images(const spec::DataSpec& spec,
                                                          const std::filesystem::path& root,
                                                          std::uint64_t seed, const FileStore& store);

// Each image format's split (image_folder_listing.cpp, image_csv_listing.cpp).
std::pair<LabelledImages, LabelledImages> image_folder_split(const spec::DataSpec& spec,
                                                             const std::filesystem::path& root,
                                                             std::uint64_t seed, const FileStore& store);
std::pair<LabelledImages, LabelledImages> image_csv_split(const spec::DataSpec& spec,
                                                          const std::filesystem::path& root,
                                                          std::uint64_t seed);

// The images an image_csv table lists (its first column, relative to `file`'s folder, the samples' root) and,
// with a `target` column (not the first), each one's label as `task` reads it: one of `classes`, a number, or
// space-separated classes (multi_label). target < 0: no labels (targets empty). Throws tp::Error(data) naming
// the file and line of a label that is not one of the classes or not a number.
LabelledImages image_csv_images(const std::filesystem::path& file, const CsvTable& table, int target,
                                spec::Task task, std::vector<std::string> classes);

}  // namespace tp::data
