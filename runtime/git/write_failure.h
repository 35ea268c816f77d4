// How checkout reports what it cannot write into the work directory.
#pragma once

#include <string>

namespace tp::git {

// Throws tp::Error "`what`: `cause`", where `cause` is libgit2's or strerror's text. A full disk or quota
// is a storage error (retryable) and says that the work directory's disk is full; the class follows
// `error_number` (write_failure_class of common/files.h) when the caller has one, else the text.
[[noreturn]] void write_failed(const std::string& what, const std::string& cause, int error_number = 0);

}  // namespace tp::git
