// tp-make-dataset: `trainpoint make-dataset` without LibTorch, for tests, the demo and benchmarks.
#include <fmt/format.h>

#include "common/error.h"
#include "data/make_dataset.h"

int main(int argc, char** argv) {
  try {
    return tp::data::run_make_dataset("tp-make-dataset", std::vector<std::string>(argv + 1, argv + argc));
  } catch (const std::exception& error) {
    fmt::print(stderr, "tp-make-dataset: {}\n", error.what());
    const auto* known = dynamic_cast<const tp::Error*>(&error);
    return known != nullptr ? static_cast<int>(known->code()) : 2;
  }
}
