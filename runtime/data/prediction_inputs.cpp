#include "data/prediction_inputs.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "data/csv.h"
#include "data/format_helpers.h"
#include "data/image.h"
#include "data/image_formats.h"
#include "data/labelled_images.h"
#include "data/shard_store.h"
#include "data/shards.h"

namespace tp::data {

namespace fs = std::filesystem;

namespace {

constexpr char kLabelColumn[] = "label";  // data.target's default: an image CSV's labels

std::int64_t class_index(const Schema& schema, const std::string& name) {
  const auto found = std::find(schema.class_names.begin(), schema.class_names.end(), name);
  return found == schema.class_names.end() ? -1 : found - schema.class_names.begin();
}

// The targets of `count` unlabelled samples: -1 or NaN (data/prediction_inputs.h).
at::Tensor unlabelled_targets(const Schema& schema, std::int64_t count) {
  return schema.classification ? at::full({count}, -1, at::kLong) : at::full({count}, NAN, at::kFloat);
}

// The validation transform the model was trained with, from the schema saved in it.
ImageTransform saved_transform(const Schema& schema) {
  ImageTransform transform;
  transform.size = static_cast<int>(schema.input_shape.at(1));
  transform.crop_to_square = schema.resize == "crop";
  for (std::size_t c = 0; c < schema.pixel_mean.size() && c < transform.normalization.mean.size(); ++c) {
    transform.normalization.mean[c] = static_cast<float>(schema.pixel_mean[c]);
    transform.normalization.std[c] = static_cast<float>(schema.pixel_std.at(c));
  }
  return transform;
}

// The class index of each file from its first folder below `root`, or nothing when some file is not in a
// folder named after a class.
std::optional<std::vector<std::int64_t>> folder_labels(const std::vector<fs::path>& files, const fs::path& root,
                                                       const Schema& schema) {
  if (!schema.classification || schema.multi_label || schema.class_names.empty()) return std::nullopt;
  std::vector<std::int64_t> labels;
  labels.reserve(files.size());
  for (const fs::path& file : files) {
    const fs::path relative = file.lexically_relative(root);
    if (std::distance(relative.begin(), relative.end()) < 2) return std::nullopt;
    const std::int64_t index = class_index(schema, relative.begin()->string());
    if (index < 0) return std::nullopt;
    labels.push_back(index);
  }
  return labels;
}

// The class indices of the model for a packed set's targets (indices into the index's classes), or nothing when
// one of its classes is not the model's.
std::optional<std::vector<std::int64_t>> packed_labels(const LabelledImages& images, const Schema& schema) {
  if (!schema.classification || schema.multi_label || images.kind != TargetKind::class_index) return std::nullopt;
  std::vector<std::int64_t> labels;
  labels.reserve(images.targets.size());
  for (const float target : images.targets) {
    const std::int64_t index = class_index(schema, images.classes.at(static_cast<std::size_t>(target)));
    if (index < 0) return std::nullopt;
    labels.push_back(index);
  }
  return labels;
}

// Packed shards (`trainpoint pack`): every sample of the index, its training shards' then its validation
// shards', labelled by the index (classes by name; regression values as they are).
PredictionInputs open_packed(const fs::path& directory, const Schema& schema, std::int64_t max_bad_files,
                             const std::shared_ptr<const FileStore>& store) {
  const ShardIndex index = read_shard_index(directory, *store);
  check_shards_present(index, directory, *store);
  LabelledImages images = shard_samples(index.train, index, directory);
  LabelledImages valid = shard_samples(index.valid, index, directory);
  images.files.insert(images.files.end(), valid.files.begin(), valid.files.end());
  images.targets.insert(images.targets.end(), valid.targets.begin(), valid.targets.end());
  if (images.files.empty()) fail(ExitCode::data, "{}: index.json lists no samples", directory.string());
  PredictionInputs inputs;
  inputs.bad_files = std::make_shared<BadFiles>(max_bad_files);
  const auto count = static_cast<std::int64_t>(images.files.size());
  at::Tensor targets = unlabelled_targets(schema, count);
  if (const auto labels = packed_labels(images, schema)) {
    targets = at::tensor(*labels, at::kLong);
    inputs.labelled = true;
  } else if (!schema.classification && images.kind == TargetKind::number) {
    targets = at::tensor(images.targets, at::kFloat);
    inputs.labelled = true;
  }
  inputs.samples = image_dataset(shard_store(store, directory, index), std::move(images.files), directory, targets,
                                 saved_transform(schema), static_cast<int>(schema.input_shape.at(0)), /*seed=*/0,
                                 inputs.bad_files);
  return inputs;
}

// Image files, labelled by their class folders below `root` when each is in one.
PredictionInputs open_image_files(std::vector<fs::path> files, const fs::path& root, const Schema& schema,
                                  std::int64_t max_bad_files, const std::shared_ptr<const FileStore>& store) {
  if (files.empty()) fail(ExitCode::data, "{}: no PNG or JPEG images to predict", root.string());
  PredictionInputs inputs;
  inputs.bad_files = std::make_shared<BadFiles>(max_bad_files);
  const auto count = static_cast<std::int64_t>(files.size());
  at::Tensor targets = unlabelled_targets(schema, count);
  if (const auto labels = folder_labels(files, root, schema)) {
    targets = at::tensor(*labels, at::kLong);
    inputs.labelled = true;
  }
  inputs.samples = image_dataset(store, std::move(files), root, targets, saved_transform(schema),
                                 static_cast<int>(schema.input_shape.at(0)), /*seed=*/0, inputs.bad_files);
  return inputs;
}

spec::Task schema_task(const Schema& schema) {
  if (!schema.classification) return spec::Task::regression;
  return schema.multi_label ? spec::Task::multi_label : spec::Task::classification;
}

int required_column(const fs::path& file, const CsvTable& table, const std::string& name, const char* option) {
  const int index = table.column(name);
  if (index < 0) fail(ExitCode::data, "{}: no column '{}' ({})", file.string(), name, option);
  return index;
}

// Images listed in a CSV, as image_csv lists them (image_csv_listing.cpp): the first column, relative to the CSV's
// folder, labelled by the column `label_column` (default: kLabelColumn, where the CSV has it).
PredictionInputs open_image_csv(const fs::path& file, const Schema& schema, const std::string& label_column,
                                std::int64_t max_bad_files, const std::shared_ptr<const FileStore>& store) {
  const CsvTable table = read_csv(store->acquire(file));
  store->release(file);
  if (table.rows.empty()) fail(ExitCode::data, "{}: no rows after the header", file.string());
  const int label =
      label_column.empty() ? table.column(kLabelColumn) : required_column(file, table, label_column, "--label-column");
  if (label == 0) fail(ExitCode::data, "{}: the first column must be the image path, not the label", file.string());
  if (label > 0 && schema_task(schema) == spec::Task::classification) {
    require_classes(file, table, label, table.header[static_cast<std::size_t>(label)]);
  }
  LabelledImages images = image_csv_images(file, table, label, schema_task(schema), schema.class_names);
  for (std::size_t i = 0; i < images.files.size(); ++i) {
    if (!store->exists(images.files[i])) {
      fail(ExitCode::data, "{}:{}: no image '{}' (the first column names an image relative to the CSV's folder)",
           file.string(), table.lines[i], table.rows[i][0]);
    }
  }
  PredictionInputs inputs;
  inputs.bad_files = std::make_shared<BadFiles>(max_bad_files);
  inputs.labelled = label > 0;
  const auto count = static_cast<std::int64_t>(images.files.size());
  at::Tensor targets = inputs.labelled ? target_tensor(images) : unlabelled_targets(schema, count);
  inputs.samples = image_dataset(store, std::move(images.files), images.root, targets, saved_transform(schema),
                                 static_cast<int>(schema.input_shape.at(0)), /*seed=*/0, inputs.bad_files);
  return inputs;
}

bool is_csv(const fs::path& file) { return file.extension() == ".csv"; }

// The .csv files directly in `folder` among its files.
std::vector<fs::path> csv_files_in(const fs::path& folder, const std::vector<fs::path>& files) {
  std::vector<fs::path> found;
  for (const fs::path& file : files) {
    const fs::path relative = file.lexically_relative(folder);
    if (is_csv(file) && std::distance(relative.begin(), relative.end()) == 1) found.push_back(file);
  }
  return found;
}

void refuse_label_column(const std::string& label_column) {
  if (label_column.empty()) return;
  fail(ExitCode::usage, "--label-column is for tables and images listed in a CSV: images in a folder are labelled "
       "by the class folder they are in, packed shards by their index");
}

// Packed shards, a CSV that lists images (a .csv file, or the one in a folder), one image, or a folder's images.
PredictionInputs open_images(const fs::path& source, const Schema& schema, const std::string& label_column,
                             std::int64_t max_bad_files, const std::shared_ptr<const FileStore>& store) {
  if (store->exists(source / kShardIndexFile)) {
    refuse_label_column(label_column);
    return open_packed(source, schema, max_bad_files, store);
  }
  if (store->exists(source)) {
    if (is_csv(source)) return open_image_csv(source, schema, label_column, max_bad_files, store);
    refuse_label_column(label_column);
    return open_image_files({source}, source.parent_path(), schema, max_bad_files, store);
  }
  std::vector<fs::path> listed = store->list(source);
  const std::vector<fs::path> csv_files = csv_files_in(source, listed);
  if (csv_files.size() > 1) {
    fail(ExitCode::data, "{}: {} CSV files ({}, {}, ...): name the one that lists the images", source.string(),
         csv_files.size(), csv_files[0].filename().string(), csv_files[1].filename().string());
  }
  if (csv_files.size() == 1) return open_image_csv(csv_files.front(), schema, label_column, max_bad_files, store);
  refuse_label_column(label_column);
  std::vector<fs::path> files;
  for (fs::path& file : listed) {
    if (has_image_extension(file)) files.push_back(std::move(file));
  }
  return open_image_files(std::move(files), source, schema, max_bad_files, store);
}

// A feature as the model names it: "column" (a number), "column=value" (1 where the cell is value) or
// "column=#na#" (1 where the number is missing), and the table's column it reads.
struct FeatureColumn {
  int column;
  bool one_hot;
  std::string value;
};

std::vector<FeatureColumn> feature_columns(const fs::path& file, const CsvTable& table, const Schema& schema) {
  std::vector<FeatureColumn> features;
  for (const std::string& name : schema.feature_names) {
    const std::size_t equals = name.find('=');
    const std::string column = name.substr(0, equals);
    const int index = table.column(column);
    if (index < 0) {
      fail(ExitCode::data, "{}: no column '{}', which the model was trained on (its columns: {})", file.string(),
           column, fmt::join(table.header, ", "));
    }
    features.push_back({index, equals != std::string::npos,
                        equals == std::string::npos ? std::string() : name.substr(equals + 1)});
  }
  return features;
}

// The table's rows as the model's standardized inputs.
at::Tensor encode_rows(const fs::path& file, const CsvTable& table, const Schema& schema) {
  const std::vector<FeatureColumn> features = feature_columns(file, table, schema);
  const auto rows = static_cast<std::int64_t>(table.rows.size());
  const auto width = static_cast<std::int64_t>(features.size());
  at::Tensor inputs = at::empty({rows, width}, at::kFloat);
  float* out = inputs.data_ptr<float>();
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    for (std::size_t f = 0; f < features.size(); ++f) {
      const FeatureColumn& feature = features[f];
      const std::string& cell = table.rows[r][static_cast<std::size_t>(feature.column)];
      double value = 0;
      if (feature.one_hot) {
        value = feature.value == "#na#" ? is_missing(cell) : cell == feature.value;
      } else if (is_missing(cell)) {
        value = schema.feature_fill.at(f);
      } else if (const auto number = parse_number(cell)) {
        value = *number;
      } else {
        fail(ExitCode::data, "{}:{}: column '{}': '{}' is not a number, and the model reads it as one",
             file.string(), table.lines[r], table.header[static_cast<std::size_t>(feature.column)], cell);
      }
      out[static_cast<std::int64_t>(r) * width + static_cast<std::int64_t>(f)] =
          static_cast<float>((value - schema.feature_mean.at(f)) / schema.feature_std.at(f));
    }
  }
  return inputs;
}

// The label column's class indices or values.
at::Tensor label_targets(const fs::path& file, const CsvTable& table, const Schema& schema, int column) {
  std::vector<std::int64_t> classes;
  std::vector<float> values;
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    const std::string& cell = table.rows[r][static_cast<std::size_t>(column)];
    if (schema.classification) {
      const std::int64_t index = class_index(schema, cell);
      if (index < 0) {
        fail(ExitCode::data, "{}:{}: column '{}': '{}' is not one of the model's classes ({})", file.string(),
             table.lines[r], table.header[static_cast<std::size_t>(column)], cell, fmt::join(schema.class_names, ", "));
      }
      classes.push_back(index);
    } else if (const auto number = parse_number(cell)) {
      values.push_back(static_cast<float>(*number));
    } else {
      fail(ExitCode::data, "{}:{}: column '{}': '{}' is not a number", file.string(), table.lines[r],
           table.header[static_cast<std::size_t>(column)], cell);
    }
  }
  return schema.classification ? at::tensor(classes, at::kLong) : at::tensor(values, at::kFloat);
}

PredictionInputs open_table(const fs::path& source, const Schema& schema, const TableColumns& columns,
                            std::int64_t max_bad_files) {
  const fs::path file = table_file(source);
  const CsvTable table = read_csv(file);
  if (table.rows.empty()) fail(ExitCode::data, "{}: no rows after the header", file.string());
  PredictionInputs inputs;
  inputs.bad_files = std::make_shared<BadFiles>(max_bad_files);
  const auto rows = static_cast<std::int64_t>(table.rows.size());
  at::Tensor targets = unlabelled_targets(schema, rows);
  if (!columns.label.empty()) {
    targets = label_targets(file, table, schema, required_column(file, table, columns.label, "--label-column"));
    inputs.labelled = true;
  }
  const int id = columns.id.empty() ? -1 : required_column(file, table, columns.id, "--id-column");
  std::vector<std::string> names;
  names.reserve(table.rows.size());
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    names.push_back(id >= 0 ? table.rows[r][static_cast<std::size_t>(id)]
                            : fmt::format("{}:{}", file.filename().string(), table.lines[r]));
  }
  inputs.samples = std::make_shared<TensorDataset>(encode_rows(file, table, schema), targets, std::move(names));
  return inputs;
}

}  // namespace

PredictionInputs open_prediction_inputs(const fs::path& source, const Schema& schema, const TableColumns& columns,
                                        std::int64_t max_bad_files, const std::shared_ptr<const FileStore>& store) {
  if (!store->exists(source) && !fs::is_directory(source)) {
    fail(ExitCode::data, "{}: no such file or folder", source.string());
  }
  if (!schema.feature_names.empty()) return open_table(source, schema, columns, max_bad_files);
  if (!columns.id.empty()) {
    fail(ExitCode::usage, "--id-column is for tables; the model reads images, and an image's id is its path");
  }
  return open_images(source, schema, columns.label, max_bad_files, store);
}

}  // namespace tp::data
