// table_csv: a CSV with a header, feature columns (numeric or data.categorical) and a target column.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include "common/error.h"
#include "data/csv.h"
#include "data/dataset.h"
#include "data/format_helpers.h"
#include "data/formats.h"
#include "data/labelled_images.h"

namespace tp::data {

namespace fs = std::filesystem;

namespace {

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

// The training file's checks before its encoding is learnt.
void check_training_table(const fs::path& file, const CsvTable& table, const spec::DataSpec& spec) {
  if (table.column(spec.target) < 0) {
    fail(ExitCode::data, "{}: no target column '{}' (data.target)", file.string(), spec.target);
  }
  if (table.rows.empty()) fail(ExitCode::data, "{}: no rows after the header", file.string());
  if (spec.task == spec::Task::multi_label)
    fail(ExitCode::spec, "data.task: multi_label needs data.format = \"image_csv\"");
  if (spec.task == spec::Task::classification) {
    require_classes(file, table, table.column(spec.target), spec.target);
  }
}

// The training and validation rows, encoded (unstandardized), and the names of the validation rows.
struct TableSplit {
  at::Tensor train_features, train_targets, valid_features, valid_targets;
  std::vector<std::string> valid_names;  // each by its file and line, for the report's top losses
};

std::string row_name(const fs::path& file, const CsvTable& table, std::size_t row) {
  return fmt::format("{}:{}", file.filename().string(), table.lines.at(row));
}

// data.valid_source's rows for validation, else a held-out data.valid share of the training file's.
TableSplit split_table(const spec::DataSpec& spec, const fs::path& root, std::uint64_t seed,
                       const fs::path& train_file, const CsvTable& train_table,
                       const TableEncoding& encoding) {
  auto [features, targets] = encode_table(train_file, train_table, spec, encoding);
  TableSplit split;
  if (!spec.valid_source.empty()) {
    const fs::path valid_file = table_file(resolve(root, spec.valid_source));
    const CsvTable valid_table = read_csv(valid_file);
    std::tie(split.valid_features, split.valid_targets) =
        encode_table(valid_file, valid_table, spec, encoding);
    for (std::size_t row = 0; row < valid_table.rows.size(); ++row) {
      split.valid_names.push_back(row_name(valid_file, valid_table, row));
    }
    split.train_features = features;
    split.train_targets = targets;
    return split;
  }
  const auto [train_indices, valid_indices] =
      split_indices(static_cast<std::size_t>(features.size(0)), spec.valid, seed);
  const auto rows = [](const std::vector<std::size_t>& indices) {
    return at::tensor(std::vector<std::int64_t>(indices.begin(), indices.end()), at::kLong);
  };
  split.train_features = features.index_select(0, rows(train_indices));
  split.train_targets = targets.index_select(0, rows(train_indices));
  split.valid_features = features.index_select(0, rows(valid_indices));
  split.valid_targets = targets.index_select(0, rows(valid_indices));
  for (const std::size_t row : valid_indices) {
    split.valid_names.push_back(row_name(train_file, train_table, row));
  }
  return split;
}

// Missing numbers become the training split's median (fastai's FillMissing; the 0.5 quantile, which is the
// mean of the two middle values like pandas' median), 0 for a column with none. Returns each feature's fill
// (NaN for the features that are not numeric columns).
std::vector<double> fill_missing(const TableEncoding& encoding, TableSplit& split) {
  const at::Tensor medians =
      at::nan_to_num(at::nanquantile(split.train_features.to(at::kDouble), 0.5, /*dim=*/0), 0.0).contiguous();
  std::vector<double> fill(encoding.feature_names.size(), std::nan(""));
  for (std::size_t feature : encoding.numeric) fill[feature] = medians.data_ptr<double>()[feature];
  const at::Tensor fill_row = at::tensor(fill, at::kDouble).to(at::kFloat);
  for (at::Tensor* features_of_split : {&split.train_features, &split.valid_features}) {
    *features_of_split = at::where(features_of_split->isnan(), fill_row, *features_of_split);
  }
  return fill;
}

// The datasets of the split, standardized with training statistics only (a constant column keeps a divisor
// of 1), and their schema.
Datasets table_datasets(const spec::DataSpec& spec, const TableEncoding& encoding, TableSplit split,
                        std::vector<double> fill) {
  at::Tensor mean = split.train_features.to(at::kDouble).mean(0);
  at::Tensor std = split.train_features.to(at::kDouble).std(0, /*unbiased=*/false);
  std = at::where(std > 1e-12, std, at::ones_like(std));
  const auto standardize = [&](const at::Tensor& x) {
    return ((x.to(at::kDouble) - mean) / std).to(at::kFloat);
  };
  Datasets datasets;
  datasets.bad_files = std::make_shared<BadFiles>(spec.max_bad_files);
  datasets.train = std::make_shared<TensorDataset>(standardize(split.train_features), split.train_targets);
  datasets.valid = std::make_shared<TensorDataset>(standardize(split.valid_features), split.valid_targets,
                                                   std::move(split.valid_names));
  Schema& schema = datasets.schema;
  schema.input_shape = {split.train_features.size(1)};
  schema.classification = spec.task == spec::Task::classification;
  schema.class_names = encoding.classes;
  schema.num_outputs = schema.classification ? static_cast<std::int64_t>(encoding.classes.size()) : 1;
  schema.feature_names = encoding.feature_names;
  mean = mean.contiguous();
  std = std.contiguous();
  schema.feature_mean.assign(mean.data_ptr<double>(), mean.data_ptr<double>() + mean.numel());
  schema.feature_std.assign(std.data_ptr<double>(), std.data_ptr<double>() + std.numel());
  schema.feature_fill = std::move(fill);
  return datasets;
}

// The training examples of each class.
std::vector<std::int64_t> class_counts(const at::Tensor& targets, std::size_t classes) {
  const at::Tensor counts =
      at::bincount(targets, {}, static_cast<std::int64_t>(classes)).to(at::kLong).contiguous();
  return {counts.data_ptr<std::int64_t>(), counts.data_ptr<std::int64_t>() + counts.numel()};
}

}  // namespace

// Reads the CSV from disk, not through `store`: a table_csv source is staged whole (storage/data_source.cpp).
Datasets open_table_csv(const spec::DataSpec& spec, const fs::path& root, std::uint64_t seed,
                        const std::shared_ptr<const FileStore>& /*store*/) {
  const fs::path train_file = table_file(resolve(root, spec.source));
  const CsvTable train_table = read_csv(train_file);
  check_training_table(train_file, train_table, spec);
  const TableEncoding encoding = learn_encoding(train_file, train_table, spec);
  TableSplit split = split_table(spec, root, seed, train_file, train_table, encoding);
  if (split.train_features.size(0) == 0)
    fail(ExitCode::data, "{}: no training rows left after the split", train_file.string());
  if (spec.task == spec::Task::classification) {
    log_classes(encoding.classes, class_counts(split.train_targets, encoding.classes.size()));
  }
  std::vector<double> fill = fill_missing(encoding, split);
  return table_datasets(spec, encoding, std::move(split), std::move(fill));
}

}  // namespace tp::data
