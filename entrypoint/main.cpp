// trainpoint's entry point: parse, run the command, and map every failure to one error line and
// a documented exit code (docs/exit-codes.md).
#include <cstdio>

#include "cli.h"
#include "commands.h"
#include "common/error.h"
#include "common/log.h"
#include "common/signals.h"

int main(int argc, char** argv) {
  tp::ignore_broken_pipes();
  tp::log::init(tp::log::Format::text, spdlog::level::info);
  try {
    const tp::cli::Options options = tp::cli::parse(argc, argv);
    tp::log::init(options.log_format, spdlog::level::from_str(options.log_level));
    return tp::commands::execute(options);
  } catch (const tp::Error& error) {
    tp::log::failure(error);
    return static_cast<int>(error.code());
  } catch (const std::exception& error) {
    spdlog::error("internal error: {} (exit 1): please report it", error.what());
    return static_cast<int>(tp::ExitCode::internal);
  }
}
