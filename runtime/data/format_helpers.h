// What the data formats share: paths, numbers and class names in cells, the CSV of a source, the class
// counts in the log. Torch-free (the image sources' listings use it); internal to data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/csv.h"

namespace tp::data {

// `path` resolved from `root` when relative, normalized.
std::filesystem::path resolve(const std::filesystem::path& root, const std::string& path);

// The number a cell holds (surrounding blanks after it allowed); none when empty, not a number or not finite.
std::optional<double> parse_number(const std::string& text);

// A missing number in a numeric feature column: an empty cell, or a marker pandas also reads as missing
// (NA, N/A, NaN, nan, null, NULL, None), blanks around it allowed.
bool is_missing(std::string_view cell);

// Sorted distinct values; numerically when every value is a number ("2" before "10").
std::vector<std::string> sorted_distinct(std::vector<std::string> values);

// The index of `name` in `names` (sorted by sorted_distinct), -1 when absent.
std::int64_t index_of(const std::vector<std::string>& names, const std::string& name);

// "circle 40, square 38": the training examples of each class (the first 20 classes, then the smallest and
// largest), so that a wrong class list shows at the start.
// `counts`: the training examples of each class, in the order of `classes`.
void log_classes(const std::vector<std::string>& classes, const std::vector<std::int64_t>& counts);

// Every row of a classification table names its class: an empty cell would become a class "".
void require_classes(const std::filesystem::path& file, const CsvTable& table, int target,
                     const std::string& name);

// `path` itself, or the one .csv file in the directory `path`.
std::filesystem::path table_file(const std::filesystem::path& path);

}  // namespace tp::data
