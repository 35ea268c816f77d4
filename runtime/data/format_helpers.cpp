#include "data/format_helpers.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>

#include "common/error.h"

namespace tp::data {

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

bool is_missing(std::string_view cell) {
  static constexpr std::string_view markers[] = {"NA", "N/A", "NaN", "nan", "null", "NULL", "None"};
  const auto begin = cell.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return true;
  cell = cell.substr(begin, cell.find_last_not_of(" \t\r") + 1 - begin);
  return std::find(std::begin(markers), std::end(markers), cell) != std::end(markers);
}

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

void log_classes(const std::vector<std::string>& classes, const std::vector<std::int64_t>& counts) {
  if (classes.empty()) return;
  const std::int64_t* count = counts.data();
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

void require_classes(const fs::path& file, const CsvTable& table, int target, const std::string& name) {
  for (std::size_t r = 0; r < table.rows.size(); ++r) {
    if (table.rows[r][static_cast<std::size_t>(target)].find_first_not_of(" \t\r") == std::string::npos) {
      fail(ExitCode::data, "{}:{}: column '{}' is empty: every row needs its class", file.string(),
           table.lines[r], name);
    }
  }
}

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

}  // namespace tp::data
