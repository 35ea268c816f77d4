// What the model needs to know about the data: the shape of a sample, the task and its classes, and how raw
// input becomes the model's (saved with the model). Torch-free, so that what only describes data needs no
// LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tp::data {

// What the model needs to know about the data.
struct Schema {
  std::vector<std::int64_t> input_shape;  // of one sample
  std::int64_t num_outputs = 0;           // classes, or 1 for regression
  bool classification = true;
  bool multi_label = false;              // targets are {num_outputs} floats of 0/1 (use a BCE loss)
  std::vector<std::string> class_names;  // classification and multi-label
  // table_csv: the model's input columns (categories expanded as "column=value", and "column=#na#", 1 where
  // a numeric column's cell is missing, for the columns with missing cells in training) and the
  // training-split statistics that standardized them, (x - mean) / std, to be saved with the model.
  // feature_fill: for numeric columns the number a missing cell stands for (the training split's median),
  // NaN for the other inputs.
  std::vector<std::string> feature_names;
  std::vector<double> feature_mean;
  std::vector<double> feature_std;
  std::vector<double> feature_fill;
  // Images: how a file becomes the input (the validation transform), to be saved with the model: `resize`
  // ("stretch": the whole image, or "crop": its centre square) to input_shape's size, then
  // (pixel / 255 - pixel_mean) / pixel_std for each channel.
  std::string resize;
  std::vector<double> pixel_mean;
  std::vector<double> pixel_std;
};

// The task as the spec names it (data.task): "classification", "multi_label" or "regression".
std::string_view task_name(const Schema& schema);

}  // namespace tp::data
