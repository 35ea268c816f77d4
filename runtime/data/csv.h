// CSV files parsed with libcsv (quotes, embedded commas and newlines), kept as text cells.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace tp::data {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::size_t> lines;  // the file line on which each row ends, for messages
  // The index of a header column, or -1.
  int column(const std::string& name) const;
};

// Reads a CSV file with a header line. Throws tp::Error (data) naming the file (and line) when it cannot
// be read, is malformed, is empty, or a row has a different number of cells than the header.
CsvTable read_csv(const std::filesystem::path& file);

}  // namespace tp::data
