#include "cli.h"

#include <cstdlib>
#include <cxxopts.hpp>
#include <sstream>

#include "common/error.h"

namespace tp::cli {
namespace {

const char* kUsage = R"(trainpoint: distributed PyTorch-style training from a git repository.

Commands:
  run        clone --repo at --ref, read --spec from it, stage the data and train
  check      validate a spec and print it resolved, with where each value came from
  version    print trainpoint's version and the libraries it was built with
  spec-reference  print the reference of every spec setting (docs/spec.md)

Every option can also be set with an environment variable, for example TRAINPOINT_REPO,
TRAINPOINT_REF, TRAINPOINT_SPEC, TRAINPOINT_WORKDIR, TRAINPOINT_SET (several key=value
separated by newlines or ';'), TRAINPOINT_LOG_FORMAT, TRAINPOINT_LOG_LEVEL.
Exit codes: 0 success; 1-127 permanent failures; 128-255 retryable failures (docs/exit-codes.md).)";

std::string from_env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

Command command_named(const std::string& name) {
  if (name == "run") return Command::run;
  if (name == "check") return Command::check;
  if (name == "version") return Command::version;
  if (name == "spec-reference") return Command::spec_reference;
  if (name == "help" || name == "--help" || name == "-h") return Command::help;
  fail(ExitCode::usage, "unknown command '{}': expected run, check, version or spec-reference (see trainpoint --help)",
       name);
}

std::vector<std::string> split_overrides(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item)) {
    std::istringstream parts(item);
    std::string part;
    while (std::getline(parts, part, ';')) {
      if (!part.empty()) items.push_back(part);
    }
  }
  return items;
}

}  // namespace

Options parse(int argc, char** argv) {
  cxxopts::Options parser("trainpoint", kUsage);
  parser.add_options()
      ("repo", "git repository: URL or local path (env TRAINPOINT_REPO)", cxxopts::value<std::string>())
      ("ref", "commit SHA, branch or tag to check out (env TRAINPOINT_REF)", cxxopts::value<std::string>())
      ("spec", "spec path inside the repository, or a local file without --repo (env TRAINPOINT_SPEC)",
       cxxopts::value<std::string>())
      ("set", "override a spec value, KEY=VALUE; repeatable (env TRAINPOINT_SET)",
       cxxopts::value<std::vector<std::string>>())
      ("workdir", "directory for checkouts, caches and relative outputs (env TRAINPOINT_WORKDIR)",
       cxxopts::value<std::string>())
      ("log-format", "text or json (env TRAINPOINT_LOG_FORMAT)", cxxopts::value<std::string>())
      ("log-level", "trace, debug, info, warn or error (env TRAINPOINT_LOG_LEVEL)", cxxopts::value<std::string>())
      ("h,help", "show this help");

  Options options;
  options.help_text = parser.help();
  if (argc < 2) return options;
  options.command = command_named(argv[1]);
  options.arguments.assign(argv + 1, argv + argc);

  cxxopts::ParseResult parsed;
  try {
    parsed = parser.parse(argc - 1, argv + 1);
  } catch (const cxxopts::exceptions::exception& error) {
    fail(ExitCode::usage, "{} (see trainpoint --help)", error.what());
  }
  if (!parsed.unmatched().empty()) {
    fail(ExitCode::usage, "unexpected argument '{}' (see trainpoint --help)", parsed.unmatched().front());
  }
  if (parsed.count("help")) options.command = Command::help;

  auto option = [&](const char* name, const char* env) {
    return parsed.count(name) ? parsed[name].as<std::string>() : from_env(env);
  };
  options.repo = option("repo", "TRAINPOINT_REPO");
  options.ref = option("ref", "TRAINPOINT_REF");
  options.spec = option("spec", "TRAINPOINT_SPEC");
  options.workdir = option("workdir", "TRAINPOINT_WORKDIR");
  if (options.workdir.empty()) options.workdir = ".";
  options.overrides = split_overrides(from_env("TRAINPOINT_SET"));
  if (parsed.count("set")) {
    for (const auto& item : parsed["set"].as<std::vector<std::string>>()) options.overrides.push_back(item);
  }

  const std::string format = option("log-format", "TRAINPOINT_LOG_FORMAT");
  if (format == "json") {
    options.log_format = log::Format::json;
  } else if (!format.empty() && format != "text") {
    fail(ExitCode::usage, "--log-format: '{}' is not text or json", format);
  }
  const std::string level = option("log-level", "TRAINPOINT_LOG_LEVEL");
  if (!level.empty()) {
    if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") {
      fail(ExitCode::usage, "--log-level: '{}' is not trace, debug, info, warn or error", level);
    }
    options.log_level = level;
  }

  const bool needs_spec = options.command == Command::run || options.command == Command::check;
  if (needs_spec && options.spec.empty()) {
    fail(ExitCode::usage, "--spec is required: the spec's path in the repository (or a local file without --repo)");
  }
  if (!options.ref.empty() && options.repo.empty()) {
    fail(ExitCode::usage, "--ref {} needs --repo: the repository to check it out from", options.ref);
  }
  return options;
}

}  // namespace tp::cli
