// `trainpoint s3 ls|cp|sync ...` for users' own scripts (docs/s3.md, "Command line").
#pragma once

#include <string>
#include <vector>

namespace tp::s3 {

// `args` are the words after "s3". Prints listings to stdout and returns 0; throws tp::Error on failure
// (usage for bad arguments).
int run_s3_command(const std::vector<std::string>& args);

}  // namespace tp::s3
