// `trainpoint s3 ls|cp|sync ...` for users' own scripts (docs/s3.md, "Command line"); entrypoint/cli.cpp
// parses its words into an S3Command.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "s3/credentials.h"
#include "s3/sender.h"

namespace tp::s3 {

enum class Verb { ls, cp, sync };
// The words of the verbs, as spec::choice_names spells a spec's choices (spec::parse_choice reads them).
constexpr std::array<std::string_view, 3> choice_names(Verb) { return {"ls", "cp", "sync"}; }

struct S3Command {
  Verb verb = Verb::ls;
  std::string source;       // ls: the s3:// URL listed; cp, sync: what is copied
  std::string destination;  // cp, sync: where to (one side s3://, the other local); ls: empty
  bool recursive = false;   // ls: every key under the prefix; cp: a whole directory or prefix
  bool verbose = false;     // cp, sync: a line per file uploaded instead of a progress line
  ConnectionOptions connection;
  TransferSettings transfer;
};

// Prints listings and summaries to stdout and returns 0; throws tp::Error on failure (usage for a copy that
// is not between S3 and local disk).
int run_s3_command(const S3Command& command);

}  // namespace tp::s3
