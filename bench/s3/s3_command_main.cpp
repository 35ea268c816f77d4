// Runs `trainpoint s3` as trainpoint would (entrypoint/cli.h reads the words), mapping errors to their exit
// class.
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"
#include "common/error.h"
#include "common/log.h"
#include "s3/command.h"

int main(int argc, char** argv) {
  tp::log::init(tp::log::Format::text, spdlog::level::warn);
  try {
    std::vector<std::string> words{"s3"};
    words.insert(words.end(), argv + 1, argv + argc);
    const tp::cli::Options options = tp::cli::parse(words);
    if (options.command == tp::cli::Command::help) return tp::cli::print_help(options);
    return tp::s3::run_s3_command(options.s3_command);
  } catch (const tp::Error& error) {
    std::fprintf(stderr, "error (%s): %s\n", std::string(tp::exit_class_name(error.code())).c_str(),
                 error.what());
    return static_cast<int>(error.code());
  }
}
