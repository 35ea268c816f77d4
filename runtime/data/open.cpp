// Opening the data a spec names: image folders, images labelled by a CSV, and tabular CSVs.
#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "common/error.h"
#include "common/files.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/file_store.h"
#include "data/image.h"
#include "data/transform.h"

namespace tp::data {
namespace {

namespace fs = std::filesystem;

fs::path resolve(const fs::path& root, const std::string& path) {
  return (fs::path(path).is_absolute() ? fs::path(path) : root / path).lexically_normal();
}

std::optional<double> parse_number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  while (*end == ' ' || *end == '\t' || *end == '\r') ++end;
  if (*end != '\0' || !std::isfinite(value)) return std::nullopt;
  return value;
}

// Sorted distinct values; numerically when every value is a number ("2" before "10").
std::vector<std::string> sorted_distinct(std::vector<std::string> values) {
  const bool numeric =
      std::all_of(values.begin(), values.end(), [](const auto& v) { return parse_number(v).has_value(); });
  std::sort(values.begin(), values.end(), [numeric](const std::string& a, const std::string& b) {
    return numeric ? *parse_number(a) < *parse_number(b) : a < b;
  });
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::int64_t index_of(const std::vector<std::string>& names, const std::string& name) {
  const auto found = std::lower_bound(names.begin(), names.end(), name);
  if (found != names.end() && *found == name) return found - names.begin();
  const auto linear = std::find(names.begin(), names.end(), name);  // numerically sorted names
  return linear == names.end() ? -1 : linear - names.begin();
}

// ----- images -----

ImageTransform eval_transform(const spec::DataSpec& spec) {
  ImageTransform transform;
  transform.size = static_cast<int>(spec.image_size);
  transform.crop_to_square = spec.resize == "crop";
  transform.normalization = spec.normalize == "imagenet"
                                ? Normalization::imagenet(static_cast<int>(spec.channels))
                                : Normalization::unit();
  return transform;
}

ImageTransform train_transform(const spec::DataSpec& spec) {
  ImageTransform transform = eval_transform(spec);
  const auto has = [&](const char* name) {
    return std::find(spec.augment.begin(), spec.augment.end(), name) != spec.augment.end();
  };
  transform.random_resized_crop = has("random_resized_crop");
  transform.flip = has("flip");
  return transform;
}

// Image files with one target each (a class index, a float, or a multi-hot vector).
class ImageDataset final : public Dataset {
 public:
  ImageDataset(std::shared_ptr<const FileStore> store, std::vector<fs::path> files, at::Tensor targets,
               ImageTransform transform, int channels, std::uint64_t seed, std::shared_ptr<BadFiles> bad_files)
      : store_(std::move(store)),
        files_(std::move(files)),
        targets_(std::move(targets)),
        transform_(transform),
        channels_(channels),
        seed_(seed),
        bad_files_(std::move(bad_files)) {}

  std::size_t size() const override { return files_.size(); }
  std::string describe(std::size_t index) const override { return files_.at(index).string(); }

  void will_read(const std::vector<std::size_t>& indices) const override {
    std::vector<fs::path> files;
    files.reserve(indices.size());
    for (const std::size_t index : indices) files.push_back(files_.at(index));
    store_->will_read(files);
  }

  Example get(std::size_t index, std::int64_t epoch) const override {
    at::Tensor input = at::empty({channels_, transform_.size, transform_.size}, at::kFloat);
    at::Tensor target = get_into(index, epoch, input);
    return {input, target};
  }

  // A bad file is reported and the next sample takes its place, with the same random choices.
  at::Tensor get_into(std::size_t index, std::int64_t epoch, at::Tensor& input) const override {
    for (std::size_t attempt = 0; attempt < files_.size(); ++attempt) {
      const std::size_t actual = (index + attempt) % files_.size();
      try {
        load(actual, epoch, index, input.data_ptr<float>());
        return targets_[static_cast<std::int64_t>(actual)];
      } catch (const Error& error) {
        if (error.code() != ExitCode::data) throw;
        bad_files_->report(describe(actual), error.what());
      }
    }
    fail(ExitCode::data, "no readable image among the {} files (the first is {})", files_.size(),
         describe(0));
  }

 private:
  // Writes channels x size x size floats to `out`.
  void load(std::size_t file_index, std::int64_t epoch, std::size_t sample_index, float* out) const {
    const std::string name = describe(file_index);
    const std::string bytes = store_->read(files_[file_index]);
    const ImageSize stored = read_image_size(bytes, name);
    std::mt19937_64 generator = sample_generator(seed_, epoch, sample_index);
    const Placement placement = place(transform_, stored, generator);
    // Decode no more than the crop needs (DCT-domain scaling, skipped rows and columns), into a reused
    // buffer.
    thread_local DecodedRegion decoded;
    decode_for_resample(bytes, name, channels_, placement.box, transform_.size, decoded);
    resample_normalized(decoded.image, decoded.box, transform_.size, placement.flip, transform_.normalization,
                        out);
  }

  std::shared_ptr<const FileStore> store_;
  std::vector<fs::path> files_;
  at::Tensor targets_;
  ImageTransform transform_;
  int channels_;
  std::uint64_t seed_;
  std::shared_ptr<BadFiles> bad_files_;
};

struct LabelledImages {
  std::vector<fs::path> files;
  at::Tensor targets;
  std::vector<std::string> classes;
};

// image_folder: one subdirectory per class, `files` the files under `dir`. `known_classes` (validation data)
// fixes the class indices.
LabelledImages list_image_folder(const std::vector<fs::path>& files, const fs::path& dir,
                                 const std::vector<std::string>* known_classes) {
  std::map<std::string, std::vector<fs::path>> images_by_class;  // every class folder, even without images
  std::map<std::string, std::set<std::string>> nested;            // class -> folders holding its deeper images
  bool loose_images = false;
  for (const fs::path& file : files) {
    const fs::path relative = file.lexically_relative(dir);
    const bool image = has_image_extension(file);
    const auto depth = std::distance(relative.begin(), relative.end());
    if (depth == 1) {
      loose_images = loose_images || image;
      continue;
    }
    auto& images = images_by_class[relative.begin()->string()];
    if (image) images.push_back(file);
    if (image && depth > 2) nested[relative.begin()->string()].insert(std::next(relative.begin())->string());
  }
  if (images_by_class.empty()) {
    fail(ExitCode::data, "{}: no class subdirectories{}", dir.string(),
         loose_images ? " (images must be in one subdirectory per class)" : "");
  }
  // A folder whose images are all in subfolders is no class: most likely it holds the classes themselves
  // (train/circle/...), and training on it would learn the wrong problem.
  for (const auto& [name, folders] : nested) {
    const auto& images = images_by_class[name];
    const bool only_folders = std::none_of(images.begin(), images.end(), [&](const fs::path& file) {
      return std::distance(file.lexically_relative(dir).begin(), file.lexically_relative(dir).end()) == 2;
    });
    if (!only_folders) continue;
    const bool split_name = name == "train" || name == "valid" || name == "val" || name == "test";
    fail(ExitCode::data, "{}: the class folder '{}' holds only folders ({}), not images: image_folder wants one "
         "folder of images per class{}", (dir / name).string(), name, fmt::join(folders, ", "),
         split_name ? " (a train/ folder beside a valid/ or val/ one is the training and validation split, "
                      "unless data.valid_source is set; or point data.source at " + (dir / name).string() + ")"
                    : " (if these folders are the classes, point data.source at " + (dir / name).string() + ")");
  }
  LabelledImages result;
  for (const auto& entry : images_by_class) result.classes.push_back(entry.first);
  if (known_classes) result.classes = *known_classes;
  std::vector<std::int64_t> labels;
  for (const auto& [name, files] : images_by_class) {
    const std::int64_t label = index_of(result.classes, name);
    if (label < 0) {
      fail(ExitCode::data, "{}: class '{}' is not among the training classes ({})", (dir / name).string(),
           name, fmt::join(result.classes, ", "));
    }
    if (files.empty())
      fail(ExitCode::data, "{}: class '{}' has no PNG or JPEG images", (dir / name).string(), name);
    result.files.insert(result.files.end(), files.begin(), files.end());
    labels.insert(labels.end(), files.size(), label);
  }
  result.targets = at::tensor(labels, at::kLong);
  return result;
}

// fastai's layout: `dir` holds train/ and valid/ (or val/), each with one folder per class; they are the
// training and validation split. Returns the two folders when `files` (those under `dir`) are laid out so.
std::optional<std::pair<fs::path, fs::path>> split_folders(const std::vector<fs::path>& files, const fs::path& dir) {
  std::set<std::string> top;  // folders directly under `dir` with files two levels below them
  for (const fs::path& file : files) {
    const fs::path relative = file.lexically_relative(dir);
    if (std::distance(relative.begin(), relative.end()) > 2) top.insert(relative.begin()->string());
  }
  if (top.count("train") == 0) return std::nullopt;
  for (const char* valid : {"valid", "val"}) {
    if (top.count(valid) > 0) return std::make_pair(dir / "train", dir / valid);
  }
  return std::nullopt;
}

// The files of `files` under `dir`.
std::vector<fs::path> files_under(const std::vector<fs::path>& files, const fs::path& dir) {
  std::vector<fs::path> under;
  const std::string prefix = (dir / "").string();
  for (const fs::path& file : files) {
    if (file.string().rfind(prefix, 0) == 0) under.push_back(file);
  }
  return under;
}

// "circle 40, square 38": the training examples of each class (the first 20 classes, then the smallest and
// largest), so that a wrong class list shows at the start.
void log_classes(const std::vector<std::string>& classes, const at::Tensor& targets) {
  if (classes.empty()) return;
  const at::Tensor counts = (targets.dim() == 2 ? targets.sum(0) : at::bincount(targets, {}, static_cast<std::int64_t>(classes.size())))
                                .to(at::kLong).contiguous();
  const std::int64_t* count = counts.data_ptr<std::int64_t>();
  std::vector<std::string> named;
  constexpr std::size_t kShown = 20;
  for (std::size_t c = 0; c < classes.size() && c < kShown; ++c) named.push_back(fmt::format("{} {}", classes[c], count[c]));
  std::string rest;
  if (classes.size() > kShown) {
    const auto [fewest, most] = std::minmax_element(count, count + classes.size());
    rest = fmt::format(" and {} more (fewest: {} {}, most: {} {})", classes.size() - kShown,
                       classes[static_cast<std::size_t>(fewest - count)], *fewest,
                       classes[static_cast<std::size_t>(most - count)], *most);
  }
  spdlog::info("{} classes, training examples of each: {}{}", classes.size(), fmt::join(named, ", "), rest);
}

// Every row of a classification table names its class: an empty cell would become a class "".
void require_classes(const fs::path& file, const CsvTable& table, int target, const std::string& name) {
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    if (table.rows[r][static_cast<std::size_t>(target)].find_first_not_of(" \t\r") == std::string::npos) {
      fail(ExitCode::data, "{}:{}: column '{}' is empty: every row needs its class", file.string(),
           table.lines[r], name);
    }
  }
}

// image_csv: the first column is an image path relative to the CSV, `target` the label column.
LabelledImages read_image_csv(const fs::path& file, const spec::DataSpec& spec,
                              const std::vector<std::string>* known_classes) {
  const CsvTable table = read_csv(file);
  const int target = table.column(spec.target);
  if (target < 0) fail(ExitCode::data, "{}: no target column '{}' (data.target)", file.string(), spec.target);
  if (target == 0)
    fail(ExitCode::data, "{}: the first column must be the image path, not the target", file.string());
  if (table.rows.empty()) fail(ExitCode::data, "{}: no rows after the header", file.string());
  if (spec.task == spec::Task::classification) require_classes(file, table, target, spec.target);
  const auto labels_of = [&](const std::string& cell) {
    std::vector<std::string> labels;
    if (spec.task != spec::Task::multi_label) return std::vector<std::string>{cell};
    std::istringstream words(cell);
    for (std::string word; words >> word;) labels.push_back(word);
    return labels;
  };
  LabelledImages result;
  if (spec.task != spec::Task::regression) {
    if (known_classes) {
      result.classes = *known_classes;
    } else {
      std::vector<std::string> all;
      for (const auto& row : table.rows) {
        for (auto& label : labels_of(row[static_cast<std::size_t>(target)])) all.push_back(std::move(label));
      }
      result.classes = sorted_distinct(std::move(all));
    }
  }
  const auto n = static_cast<std::int64_t>(table.rows.size());
  const auto classes = static_cast<std::int64_t>(result.classes.size());
  switch (spec.task) {
    case spec::Task::classification: result.targets = at::empty({n}, at::kLong); break;
    case spec::Task::multi_label: result.targets = at::zeros({n, classes}, at::kFloat); break;
    case spec::Task::regression: result.targets = at::empty({n}, at::kFloat); break;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& row = table.rows[static_cast<std::size_t>(i)];
    const std::string& cell = row[static_cast<std::size_t>(target)];
    const std::size_t line = table.lines[static_cast<std::size_t>(i)];
    result.files.push_back(file.parent_path() / row[0]);
    if (spec.task == spec::Task::regression) {
      const auto value = parse_number(cell);
      if (!value)
        fail(ExitCode::data, "{}:{}: column '{}': '{}' is not a number", file.string(), line, spec.target,
             cell);
      result.targets[i] = *value;
      continue;
    }
    for (const auto& label : labels_of(cell)) {
      const std::int64_t index = index_of(result.classes, label);
      if (index < 0) {
        fail(ExitCode::data, "{}:{}: column '{}': '{}' is not among the training classes", file.string(),
             line, spec.target, label);
      }
      if (spec.task == spec::Task::classification) {
        result.targets[i] = index;
      } else {
        result.targets[i][index] = 1.0;
      }
    }
  }
  return result;
}

fs::path table_file(const fs::path& path);

// A seeded `fraction` of `all` as validation, the rest for training.
std::pair<LabelledImages, LabelledImages> hold_out(const LabelledImages& all, double fraction, std::uint64_t seed) {
  const auto [train_indices, valid_indices] = split_indices(all.files.size(), fraction, seed);
  const auto take = [&](const std::vector<std::size_t>& indices) {
    LabelledImages part;
    part.classes = all.classes;
    for (std::size_t i : indices) part.files.push_back(all.files[i]);
    std::vector<std::int64_t> rows(indices.begin(), indices.end());
    part.targets = all.targets.index_select(0, at::tensor(rows, at::kLong));
    return part;
  };
  return {take(train_indices), take(valid_indices)};
}

// The training and the validation images: data.valid_source, else fastai's train/ and valid/ folders, else a
// held-out share of data.source.
std::pair<LabelledImages, LabelledImages> training_and_validation(const spec::DataSpec& spec, const fs::path& root,
                                                                  std::uint64_t seed, const FileStore& store) {
  const fs::path source = resolve(root, spec.source);
  const fs::path valid_source = spec.valid_source.empty() ? fs::path() : resolve(root, spec.valid_source);
  if (spec.format == spec::DataFormat::image_csv) {
    LabelledImages train = read_image_csv(table_file(source), spec, nullptr);
    if (valid_source.empty()) return hold_out(train, spec.valid, seed);
    LabelledImages valid = read_image_csv(table_file(valid_source), spec, &train.classes);
    return {std::move(train), std::move(valid)};
  }
  const std::vector<fs::path> files = store.list(source);
  if (!valid_source.empty()) {
    LabelledImages train = list_image_folder(files, source, nullptr);
    LabelledImages valid = list_image_folder(store.list(valid_source), valid_source, &train.classes);
    return {std::move(train), std::move(valid)};
  }
  if (const auto split = split_folders(files, source)) {
    const auto& [train_dir, valid_dir] = *split;
    spdlog::info("{}: {}/ and {}/ are the training and validation split (data.valid is not used)", source.string(),
                 train_dir.filename().string(), valid_dir.filename().string());
    LabelledImages train = list_image_folder(files_under(files, train_dir), train_dir, nullptr);
    LabelledImages valid = list_image_folder(files_under(files, valid_dir), valid_dir, &train.classes);
    return {std::move(train), std::move(valid)};
  }
  return hold_out(list_image_folder(files, source, nullptr), spec.valid, seed);
}

Datasets open_images(const spec::DataSpec& spec, const fs::path& root, std::uint64_t seed,
                     const std::shared_ptr<const FileStore>& store) {
  auto [train, valid] = training_and_validation(spec, root, seed, *store);
  if (spec.task != spec::Task::regression) log_classes(train.classes, train.targets);
  Datasets datasets;
  datasets.bad_files = std::make_shared<BadFiles>(spec.max_bad_files);
  const int channels = static_cast<int>(spec.channels);
  datasets.train = std::make_shared<ImageDataset>(store, std::move(train.files), train.targets,
                                                  train_transform(spec), channels, seed, datasets.bad_files);
  datasets.valid = std::make_shared<ImageDataset>(store, std::move(valid.files), valid.targets,
                                                  eval_transform(spec), channels, seed, datasets.bad_files);
  Schema& schema = datasets.schema;
  schema.input_shape = {channels, spec.image_size, spec.image_size};
  schema.classification = spec.task != spec::Task::regression;
  schema.multi_label = spec.task == spec::Task::multi_label;
  schema.class_names = train.classes;
  schema.num_outputs = schema.classification ? static_cast<std::int64_t>(train.classes.size()) : 1;
  schema.resize = spec.resize;
  const Normalization normalization = eval_transform(spec).normalization;
  schema.pixel_mean.assign(normalization.mean.begin(), normalization.mean.begin() + channels);
  schema.pixel_std.assign(normalization.std.begin(), normalization.std.begin() + channels);
  return datasets;
}

// ----- tables -----

// `path` itself, or the one .csv file in the directory `path`.
fs::path table_file(const fs::path& path) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) return path;
  if (!fs::is_directory(path, error)) fail(ExitCode::data, "{}: no such file or directory", path.string());
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.is_regular_file() && entry.path().extension() == ".csv") found.push_back(entry.path());
  }
  if (found.size() != 1) {
    fail(ExitCode::data, "{}: expected exactly one .csv file in the directory, found {}", path.string(),
         found.size());
  }
  return found.front();
}

// A missing number in a numeric feature column: an empty cell, or a marker pandas also reads as missing.
bool is_missing(std::string_view cell) {
  static constexpr std::string_view markers[] = {"NA", "N/A", "NaN", "nan", "null", "NULL", "None"};
  const auto begin = cell.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return true;
  cell = cell.substr(begin, cell.find_last_not_of(" \t\r") + 1 - begin);
  return std::find(std::begin(markers), std::end(markers), cell) != std::end(markers);
}

// How the columns of a table become features and a target; learnt from the training file.
struct TableEncoding {
  std::vector<std::string> feature_names;
  std::map<std::string, std::vector<std::string>> categories;  // categorical column -> sorted values
  std::vector<std::string> classes;                            // classification targets
  std::set<std::string> flagged;     // numeric columns with missing cells: an extra "column=#na#" input
  std::vector<std::size_t> numeric;  // the features that are numeric columns (missing cells get filled)
};

TableEncoding learn_encoding(const fs::path& file, const CsvTable& table, const spec::DataSpec& spec) {
  TableEncoding encoding;
  for (const auto& name : spec.categorical) {
    if (table.column(name) < 0)
      fail(ExitCode::data, "{}: no categorical column '{}' (data.categorical)", file.string(), name);
  }
  const int target = table.column(spec.target);
  for (std::size_t c = 0; c < table.header.size(); ++c) {
    const std::string& name = table.header[c];
    const bool categorical =
        std::find(spec.categorical.begin(), spec.categorical.end(), name) != spec.categorical.end();
    std::vector<std::string> values;
    if (categorical || static_cast<int>(c) == target) {
      for (const auto& row : table.rows) values.push_back(row[c]);
    }
    if (static_cast<int>(c) == target) {
      if (spec.task == spec::Task::classification) encoding.classes = sorted_distinct(std::move(values));
    } else if (categorical) {
      auto& levels = encoding.categories[name] = sorted_distinct(std::move(values));
      for (const auto& level : levels) encoding.feature_names.push_back(name + "=" + level);
    } else {
      encoding.numeric.push_back(encoding.feature_names.size());
      encoding.feature_names.push_back(name);
      if (std::any_of(table.rows.begin(), table.rows.end(),
                      [&](const auto& row) { return is_missing(row[c]); })) {
        encoding.flagged.insert(name);
        encoding.feature_names.push_back(name + "=#na#");
      }
    }
  }
  return encoding;
}

// Features {rows, features} and targets, unstandardized.
std::pair<at::Tensor, at::Tensor> encode_table(const fs::path& file, const CsvTable& table,
                                               const spec::DataSpec& spec, const TableEncoding& encoding) {
  const int target = table.column(spec.target);
  if (target < 0) fail(ExitCode::data, "{}: no target column '{}' (data.target)", file.string(), spec.target);
  const auto rows = static_cast<std::int64_t>(table.rows.size());
  at::Tensor features =
      at::zeros({rows, static_cast<std::int64_t>(encoding.feature_names.size())}, at::kFloat);
  at::Tensor targets =
      spec.task == spec::Task::classification ? at::empty({rows}, at::kLong) : at::empty({rows}, at::kFloat);
  float* out = features.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto& row = table.rows[static_cast<std::size_t>(r)];
    const std::size_t line = table.lines[static_cast<std::size_t>(r)];
    std::size_t feature = 0;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const std::string& name = table.header[c];
      if (static_cast<int>(c) == target) {
        if (spec.task == spec::Task::classification) {
          const std::int64_t index = index_of(encoding.classes, row[c]);
          if (index < 0) {
            fail(ExitCode::data, "{}:{}: column '{}': '{}' is not among the training classes", file.string(),
                 line, name, row[c]);
          }
          targets.data_ptr<std::int64_t>()[r] = index;
        } else {
          const auto value = parse_number(row[c]);
          if (!value)
            fail(ExitCode::data, "{}:{}: column '{}': '{}' is not a number", file.string(), line, name,
                 row[c]);
          targets.data_ptr<float>()[r] = static_cast<float>(*value);
        }
      } else if (const auto levels = encoding.categories.find(name); levels != encoding.categories.end()) {
        const std::int64_t index = index_of(levels->second, row[c]);
        // A category unseen in training encodes as all zeros.
        if (index >= 0) out[r * features.size(1) + static_cast<std::int64_t>(feature) + index] = 1.f;
        feature += levels->second.size();
      } else {
        float* cell = out + r * features.size(1) + static_cast<std::int64_t>(feature);
        const bool flagged = encoding.flagged.count(name) > 0;
        feature += flagged ? 2 : 1;
        if (is_missing(row[c])) {
          cell[0] = std::nanf("");  // filled with the training split's median once it is known
          if (flagged) cell[1] = 1.f;
          continue;
        }
        const auto value = parse_number(row[c]);
        if (!value) {
          fail(ExitCode::data,
               "{}:{}: column '{}': '{}' is not a number (list categorical columns in data.categorical)",
               file.string(), line, name, row[c]);
        }
        cell[0] = static_cast<float>(*value);
      }
    }
  }
  return {features, targets};
}

Datasets open_table(const spec::DataSpec& spec, const fs::path& root, std::uint64_t seed) {
  const fs::path train_file = table_file(resolve(root, spec.source));
  const CsvTable train_table = read_csv(train_file);
  if (train_table.column(spec.target) < 0) {
    fail(ExitCode::data, "{}: no target column '{}' (data.target)", train_file.string(), spec.target);
  }
  if (train_table.rows.empty()) fail(ExitCode::data, "{}: no rows after the header", train_file.string());
  if (spec.task == spec::Task::multi_label)
    fail(ExitCode::spec, "data.task: multi_label needs data.format = \"image_csv\"");
  if (spec.task == spec::Task::classification) {
    require_classes(train_file, train_table, train_table.column(spec.target), spec.target);
  }
  const TableEncoding encoding = learn_encoding(train_file, train_table, spec);
  auto [features, targets] = encode_table(train_file, train_table, spec, encoding);

  at::Tensor train_features, train_targets, valid_features, valid_targets;
  if (!spec.valid_source.empty()) {
    const fs::path valid_file = table_file(resolve(root, spec.valid_source));
    std::tie(valid_features, valid_targets) = encode_table(valid_file, read_csv(valid_file), spec, encoding);
    train_features = features;
    train_targets = targets;
  } else {
    auto [train_indices, valid_indices] =
        split_indices(static_cast<std::size_t>(features.size(0)), spec.valid, seed);
    const auto rows = [](const std::vector<std::size_t>& indices) {
      return at::tensor(std::vector<std::int64_t>(indices.begin(), indices.end()), at::kLong);
    };
    train_features = features.index_select(0, rows(train_indices));
    train_targets = targets.index_select(0, rows(train_indices));
    valid_features = features.index_select(0, rows(valid_indices));
    valid_targets = targets.index_select(0, rows(valid_indices));
  }
  if (train_features.size(0) == 0)
    fail(ExitCode::data, "{}: no training rows left after the split", train_file.string());
  if (spec.task == spec::Task::classification) log_classes(encoding.classes, train_targets);

  // Missing numbers become the training split's median (fastai's FillMissing; the 0.5 quantile, which is the
  // mean of the two middle values like pandas' median), 0 for a column with none.
  const at::Tensor medians =
      at::nan_to_num(at::nanquantile(train_features.to(at::kDouble), 0.5, /*dim=*/0), 0.0).contiguous();
  std::vector<double> fill(encoding.feature_names.size(), std::nan(""));
  for (std::size_t feature : encoding.numeric) fill[feature] = medians.data_ptr<double>()[feature];
  const at::Tensor fill_row = at::tensor(fill, at::kDouble).to(at::kFloat);
  for (at::Tensor* features_of_split : {&train_features, &valid_features}) {
    *features_of_split = at::where(features_of_split->isnan(), fill_row, *features_of_split);
  }

  // Standardize with training statistics only; a constant column keeps a divisor of 1.
  at::Tensor mean = train_features.to(at::kDouble).mean(0);
  at::Tensor std = train_features.to(at::kDouble).std(0, /*unbiased=*/false);
  std = at::where(std > 1e-12, std, at::ones_like(std));
  const auto standardize = [&](const at::Tensor& x) {
    return ((x.to(at::kDouble) - mean) / std).to(at::kFloat);
  };

  Datasets datasets;
  datasets.bad_files = std::make_shared<BadFiles>(spec.max_bad_files);
  datasets.train = std::make_shared<TensorDataset>(standardize(train_features), train_targets);
  datasets.valid = std::make_shared<TensorDataset>(standardize(valid_features), valid_targets);
  Schema& schema = datasets.schema;
  schema.input_shape = {features.size(1)};
  schema.classification = spec.task == spec::Task::classification;
  schema.class_names = encoding.classes;
  schema.num_outputs = schema.classification ? static_cast<std::int64_t>(encoding.classes.size()) : 1;
  schema.feature_names = encoding.feature_names;
  mean = mean.contiguous();
  std = std.contiguous();
  schema.feature_mean.assign(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
  schema.feature_std.assign(std.data_ptr<double>(), std.data_ptr<double>() + std.numel());
  schema.feature_fill = fill;
  return datasets;
}

}  // namespace

Datasets open(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
              const std::shared_ptr<const FileStore>& store) {
  if (spec.source.empty()) fail(ExitCode::spec, "data.source: required");
  Datasets datasets;
  switch (spec.format) {
    case spec::DataFormat::image_folder:
    case spec::DataFormat::image_csv: datasets = open_images(spec, root, seed, store); break;
    case spec::DataFormat::table_csv: datasets = open_table(spec, root, seed); break;
  }
  const Schema& schema = datasets.schema;
  // One class trains to a loss of 0 and predicts nothing: a data mistake, not a run to wait for.
  if (schema.classification && !schema.multi_label && schema.class_names.size() == 1) {
    fail(ExitCode::data, "{}: every sample has the class '{}': classification needs two or more",
         resolve(root, spec.source).string(), schema.class_names.front());
  }
  return datasets;
}

}  // namespace tp::data
