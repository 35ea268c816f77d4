// tp-make-dataset: `trainpoint make-dataset` without LibTorch, for tests, the demo and benchmarks: the same
// words, read by the same parser (entrypoint/cli.h).
#include <fmt/format.h>

#include "cli.h"
#include "common/error.h"
#include "data/make_dataset.h"

int main(int argc, char** argv) {
  try {
    std::vector<std::string> words{"make-dataset"};
    words.insert(words.end(), argv + 1, argv + argc);
    const tp::cli::Options options = tp::cli::parse(words);
    if (options.command == tp::cli::Command::help) return tp::cli::print_help(options);
    return tp::data::make_dataset(options.make_dataset);
  } catch (const std::exception& error) {
    fmt::print(stderr, "tp-make-dataset: {}\n", error.what());
    const auto* known = dynamic_cast<const tp::Error*>(&error);
    return known != nullptr ? static_cast<int>(known->code()) : 2;
  }
}
