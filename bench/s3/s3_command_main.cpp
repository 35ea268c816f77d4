// Runs tp::s3::run_s3_command as `trainpoint s3` would, mapping errors to their exit class.
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "s3/command.h"

int main(int argc, char** argv) {
  tp::log::init(tp::log::Format::text, spdlog::level::warn);
  try {
    return tp::s3::run_s3_command(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const tp::Error& error) {
    std::fprintf(stderr, "error (%s): %s\n", std::string(tp::exit_class_name(error.code())).c_str(),
                 error.what());
    return static_cast<int>(error.code());
  }
}
