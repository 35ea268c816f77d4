#include "git/write_failure.h"

#include "common/error.h"
#include "common/files.h"

namespace tp::git {

void write_failed(const std::string& what, const std::string& cause, int error_number) {
  const bool full =
      cause.find("No space left") != std::string::npos || cause.find("Disk quota") != std::string::npos;
  const ExitCode code = error_number != 0 ? write_failure_class(error_number)
                        : full            ? ExitCode::storage
                                          : ExitCode::output;
  fail(code, "{}: {}{}", what, cause, full ? " (the work directory's disk is full)" : "");
}

}  // namespace tp::git
