#include "support/tables.h"

#include <fmt/format.h>

namespace tp::testing {

std::string separable_table(int rows) {
  std::string csv = "a,b,c,d,label\n";
  for (int i = 0; i < rows; ++i) {
    const int label = i % 3;
    csv += fmt::format("{},{},{},{},c{}\n", label * 2 + (i % 7) * 0.1, (i % 11) * 0.3 - label, (i % 5) * 0.2,
                       label * 0.5 - (i % 13) * 0.05, label);
  }
  return csv;
}

}  // namespace tp::testing
