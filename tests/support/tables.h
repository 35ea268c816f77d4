// Small datasets that tests train on.
#pragma once

#include <string>

namespace tp::testing {

// A classification table as CSV: columns a, b, c, d and label; 3 classes (c0, c1, c2) separable from the 4
// features; `rows` rows, the same for the same count.
std::string separable_table(int rows);

}  // namespace tp::testing
