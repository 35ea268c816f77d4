// image_csv's listing: a CSV whose first column is an image path and whose data.target column is the label.
// Torch-free: what `trainpoint pack` packs, and what image_csv.cpp opens.
#include <sstream>

#include "common/error.h"
#include "data/csv.h"
#include "data/format_helpers.h"
#include "data/labelled_images.h"

namespace tp::data {

namespace fs = std::filesystem;

namespace {

TargetKind target_kind(spec::Task task) {
  switch (task) {
    case spec::Task::classification: return TargetKind::class_index;
    case spec::Task::regression: return TargetKind::number;
    case spec::Task::multi_label: return TargetKind::multi_hot;
  }
  spec::unhandled(task);
}

// The labels of a cell: the cell, or its space-separated class names (multi_label).
std::vector<std::string> cell_labels(const std::string& cell, spec::Task task) {
  if (task != spec::Task::multi_label) return {cell};
  std::vector<std::string> labels;
  std::istringstream words(cell);
  for (std::string word; words >> word;) labels.push_back(word);
  return labels;
}

// The first column is an image path relative to the CSV, `target` the label column.
LabelledImages read_image_csv(const fs::path& file, const spec::DataSpec& spec,
                              const std::vector<std::string>* known_classes) {
  const CsvTable table = read_csv(file);
  const int target = table.column(spec.target);
  if (target < 0) fail(ExitCode::data, "{}: no target column '{}' (data.target)", file.string(), spec.target);
  if (target == 0)
    fail(ExitCode::data, "{}: the first column must be the image path, not the target", file.string());
  if (table.rows.empty()) fail(ExitCode::data, "{}: no rows after the header", file.string());
  if (spec.task == spec::Task::classification) require_classes(file, table, target, spec.target);
  std::vector<std::string> classes;
  if (known_classes) {
    classes = *known_classes;
  } else if (spec.task != spec::Task::regression) {
    for (const auto& row : table.rows) {
      for (auto& label : cell_labels(row[static_cast<std::size_t>(target)], spec.task)) {
        classes.push_back(std::move(label));
      }
    }
    classes = sorted_distinct(std::move(classes));
  }
  return image_csv_images(file, table, target, spec.task, std::move(classes));
}

}  // namespace

LabelledImages image_csv_images(const fs::path& file, const CsvTable& table, int target, spec::Task task,
                                std::vector<std::string> classes) {
  LabelledImages result;
  result.root = file.parent_path();
  for (const auto& row : table.rows) result.files.push_back(result.root / row[0]);
  if (target < 0) return result;
  if (task != spec::Task::regression) result.classes = std::move(classes);
  result.kind = target_kind(task);
  const std::size_t width = result.target_width();
  const std::string& column = table.header[static_cast<std::size_t>(target)];
  result.targets.assign(table.rows.size() * width, 0.0f);
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    const std::string& cell = table.rows[i][static_cast<std::size_t>(target)];
    const std::size_t line = table.lines[i];
    if (task == spec::Task::regression) {
      const auto value = parse_number(cell);
      if (!value) fail(ExitCode::data, "{}:{}: column '{}': '{}' is not a number", file.string(), line, column, cell);
      result.targets[i] = static_cast<float>(*value);
      continue;
    }
    for (const auto& label : cell_labels(cell, task)) {
      const std::int64_t index = index_of(result.classes, label);
      if (index < 0) {
        fail(ExitCode::data, "{}:{}: column '{}': '{}' is not among the training classes", file.string(), line,
             column, label);
      }
      if (task == spec::Task::classification) {
        result.targets[i] = static_cast<float>(index);
      } else {
        result.targets[i * width + static_cast<std::size_t>(index)] = 1.0f;
      }
    }
  }
  return result;
}

std::pair<LabelledImages, LabelledImages> image_csv_split(const spec::DataSpec& spec, const fs::path& root,
                                                          std::uint64_t seed) {
  const fs::path source = resolve(root, spec.source);
  const fs::path valid_source = spec.valid_source.empty() ? fs::path() : resolve(root, spec.valid_source);
  LabelledImages train = read_image_csv(table_file(source), spec, nullptr);
  if (valid_source.empty()) return hold_out(train, spec.valid, seed);
  LabelledImages valid = read_image_csv(table_file(valid_source), spec, &train.classes);
  return {std::move(train), std::move(valid)};
}

}  // namespace tp::data
