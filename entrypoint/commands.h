// The commands behind the CLI. Each returns the process exit code or throws tp::Error.
#pragma once

#include "cli.h"

namespace tp::commands {

int execute(const cli::Options& options);

}  // namespace tp::commands
