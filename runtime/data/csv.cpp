#include "data/csv.h"

#include <csv.h>

#include <algorithm>

#include "common/error.h"
#include "common/files.h"

namespace tp::data {
namespace {

struct Collector {
  std::vector<std::vector<std::string>> records;
  std::vector<std::size_t> lines;
  std::vector<std::string> current;
  std::size_t line = 0;
  std::size_t record_start = 1;  // the line the record being read starts on (blank lines are skipped)
};

void on_field(void* data, std::size_t size, void* collector) {
  static_cast<Collector*>(collector)->current.emplace_back(static_cast<const char*>(data), size);
}

void on_record(int /*terminator*/, void* collector) {
  auto& c = *static_cast<Collector*>(collector);
  c.records.push_back(std::move(c.current));
  c.lines.push_back(c.line);
  c.current.clear();
  c.record_start = c.line + 1;
}

}  // namespace

int CsvTable::column(const std::string& name) const {
  const auto found = std::find(header.begin(), header.end(), name);
  return found == header.end() ? -1 : static_cast<int>(found - header.begin());
}

CsvTable read_csv(const std::filesystem::path& file) {
  const std::string text = read_file(file, ExitCode::data);
  csv_parser parser;
  if (csv_init(&parser, CSV_STRICT | CSV_STRICT_FINI) != 0)
    fail(ExitCode::internal, "cannot initialise libcsv");
  Collector collector;
  // Feed one line at a time so that each record knows the line it ends on.
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t newline = text.find('\n', start);
    const std::size_t end = newline == std::string::npos ? text.size() : newline + 1;
    ++collector.line;
    if (collector.record_start == collector.line && text.find_first_not_of(" \t\r\n", start) >= end) {
      ++collector.record_start;  // a blank line between records
    }
    if (csv_parse(&parser, text.data() + start, end - start, on_field, on_record, &collector) !=
        end - start) {
      const std::string message = csv_strerror(csv_error(&parser));
      csv_free(&parser);
      fail(ExitCode::data, "{}:{}: malformed CSV: {}", file.string(), collector.line, message);
    }
    start = end;
  }
  if (csv_fini(&parser, on_field, on_record, &collector) != 0) {  // strict: only an unclosed quote
    csv_free(&parser);
    fail(ExitCode::data, "{}:{}: malformed CSV: a quoted field in the record starting here is not closed",
         file.string(), collector.record_start);
  }
  csv_free(&parser);
  if (collector.records.empty())
    fail(ExitCode::data, "{}: empty CSV file (a header line is needed)", file.string());
  CsvTable table;
  table.header = std::move(collector.records.front());
  for (std::size_t i = 1; i < collector.records.size(); ++i) {
    if (collector.records[i].size() != table.header.size()) {
      fail(ExitCode::data, "{}:{}: {} cells, but the header has {} columns", file.string(),
           collector.lines[i], collector.records[i].size(), table.header.size());
    }
    table.rows.push_back(std::move(collector.records[i]));
    table.lines.push_back(collector.lines[i]);
  }
  return table;
}

}  // namespace tp::data
