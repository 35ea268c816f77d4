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
  const auto labels_of = [&](const std::string& cell) {
    std::vector<std::string> labels;
    if (spec.task != spec::Task::multi_label) return std::vector<std::string>{cell};
    std::istringstream words(cell);
    for (std::string word; words >> word;) labels.push_back(word);
    return labels;
  };
  LabelledImages result;
  result.root = file.parent_path();
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
  result.kind = target_kind(spec.task);
  const std::size_t width = result.target_width();
  result.targets.assign(table.rows.size() * width, 0.0f);
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    const auto& row = table.rows[i];
    const std::string& cell = row[static_cast<std::size_t>(target)];
    const std::size_t line = table.lines[i];
    result.files.push_back(file.parent_path() / row[0]);
    if (spec.task == spec::Task::regression) {
      const auto value = parse_number(cell);
      if (!value)
        fail(ExitCode::data, "{}:{}: column '{}': '{}' is not a number", file.string(), line, spec.target,
             cell);
      result.targets[i] = static_cast<float>(*value);
      continue;
    }
    for (const auto& label : labels_of(cell)) {
      const std::int64_t index = index_of(result.classes, label);
      if (index < 0) {
        fail(ExitCode::data, "{}:{}: column '{}': '{}' is not among the training classes", file.string(),
             line, spec.target, label);
      }
      if (spec.task == spec::Task::classification) {
        result.targets[i] = static_cast<float>(index);
      } else {
        result.targets[i * width + static_cast<std::size_t>(index)] = 1.0f;
      }
    }
  }
  return result;
}

}  // namespace

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
