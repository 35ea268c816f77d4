// `trainpoint make-dataset`: learnable synthetic data to try trainpoint with (the examples, the demo), also for
// tests and benchmarks (tests/tools/tp-make-dataset runs the same code without loading LibTorch).
//   make-dataset images --out DIR [--classes 3] [--per-class 60 | --count N] [--size 32 | WxH]
//                       [--format png|jpeg|mixed] [--channels 3] [--seed 1]
//   make-dataset table --out FILE.csv [--rows 1000] [--task classification|regression] [--seed 1]
// entrypoint/cli.cpp parses those words into a MakeDatasetRequest.
#pragma once

#include <cstdint>
#include <string>

#include "spec/spec.h"

namespace tp::data {

enum class DatasetKind { images, table };  // an image folder of shapes, one subdirectory per class; a CSV
enum class ImageFileFormat { png, jpeg, mixed };  // mixed: PNG and JPEG files by turns
// Their words, as spec::choice_names spells a spec's choices (spec::parse_choice reads them).
constexpr spec::ChoiceNames<2> choice_names(DatasetKind) { return {"images", "table"}; }
constexpr spec::ChoiceNames<3> choice_names(ImageFileFormat) { return {"png", "jpeg", "mixed"}; }

struct MakeDatasetRequest {
  DatasetKind kind = DatasetKind::images;
  std::string out;  // images: a directory; table: a CSV file
  // images
  int classes = 3;    // shapes, 2 to 8
  int count = 180;    // images in all; the classes take turns
  int width = 32;
  int height = 32;
  ImageFileFormat format = ImageFileFormat::png;
  int channels = 3;  // 1 (gray) or 3 (RGB)
  // table
  int rows = 1000;
  spec::Task task = spec::Task::classification;  // classification or regression
  std::uint64_t seed = 1;  // the same request, the same bytes
};

// Writes the dataset and prints what it made; returns 0. Throws tp::Error: usage for a number of classes or
// channels it cannot draw, output for files it cannot write.
int make_dataset(const MakeDatasetRequest& request);

}  // namespace tp::data
