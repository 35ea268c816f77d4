#include "cli.h"

#include <cstdlib>
// --set values are whole TOML values such as data.augment=["flip","random_resized_crop"]: a repeated
// option, never split at commas.
#define CXXOPTS_VECTOR_DELIMITER '\n'
#include <cxxopts.hpp>
#include <sstream>

#include "common/error.h"

namespace tp::cli {
namespace {

const char* kUsage = R"(trainpoint: distributed PyTorch-style training from a git repository.

Commands:
  run        clone --repo at --ref, read --spec from it, stage the data and train
  preflight  check what run needs (ref, spec, data, output, GPUs, master, disk) and print a table
  check      validate a spec and print it resolved, with where each value came from
  version    print trainpoint's version and the libraries it was built with
  spec-reference  print the reference of every spec setting (docs/spec.md)
  render-job print a Kubernetes PyTorchJob (or TrainJob) running --spec of --repo at --ref
  s3 ls|cp|sync   list and copy S3 objects with trainpoint's client (trainpoint s3 --help)

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
  if (name == "preflight") return Command::preflight;
  if (name == "check") return Command::check;
  if (name == "version") return Command::version;
  if (name == "spec-reference") return Command::spec_reference;
  if (name == "s3") return Command::s3;
  if (name == "render-job") return Command::render_job;
  if (name == "help" || name == "--help" || name == "-h") return Command::help;
  fail(ExitCode::usage, "unknown command '{}': expected run, preflight, check, version, spec-reference, s3 or render-job (see trainpoint --help)",
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
      ("expect-sha", "fail unless --ref resolves to this commit (env TRAINPOINT_EXPECT_SHA)",
       cxxopts::value<std::string>())
      ("git-cache", "node-local directory of git mirrors, shared by runs and ranks (env TRAINPOINT_GIT_CACHE)",
       cxxopts::value<std::string>())
      ("git-token-file", "file holding an HTTPS token or password (env TRAINPOINT_GIT_TOKEN_FILE); "
       "or put the token itself in env TRAINPOINT_GIT_TOKEN", cxxopts::value<std::string>())
      ("git-user", "HTTPS user name for the token (env TRAINPOINT_GIT_USER)", cxxopts::value<std::string>())
      ("ca-bundle", "PEM file of extra trusted CAs for HTTPS (env TRAINPOINT_CA_BUNDLE)", cxxopts::value<std::string>())
      ("ssh-key", "SSH private key file (env TRAINPOINT_SSH_KEY)", cxxopts::value<std::string>())
      ("known-hosts", "known_hosts file for SSH host-key checks (env TRAINPOINT_KNOWN_HOSTS)",
       cxxopts::value<std::string>())
      ("accept-unknown-host", "accept an SSH host missing from known_hosts, with a warning "
       "(env TRAINPOINT_ACCEPT_UNKNOWN_HOST=1)")
      ("no-submodules", "do not check out submodules (env TRAINPOINT_NO_SUBMODULES=1)")
      ("no-lfs", "leave Git LFS pointers as they are (env TRAINPOINT_NO_LFS=1)")
      ("no-preflight", "run: skip the preflight checks (env TRAINPOINT_NO_PREFLIGHT=1)")
      ("git-timeout", "seconds transient network failures are retried (env TRAINPOINT_GIT_TIMEOUT)",
       cxxopts::value<std::string>())
      ("log-format", "text or json (env TRAINPOINT_LOG_FORMAT)", cxxopts::value<std::string>())
      ("log-level", "trace, debug, info, warn or error (env TRAINPOINT_LOG_LEVEL)", cxxopts::value<std::string>())
      ("h,help", "show this help");
  // render-job's flags; each one sets the [k8s] key of the same name (docs/guide.md).
  parser.add_options("render-job")
      ("kind", "pytorchjob or trainjob", cxxopts::value<std::string>())
      ("name", "the job's name in Kubernetes (default: job.name)", cxxopts::value<std::string>())
      ("namespace", "the namespace", cxxopts::value<std::string>())
      ("image", "the trainpoint image", cxxopts::value<std::string>())
      ("workers", "pods (nodes) in the job", cxxopts::value<std::string>())
      ("gpus", "GPUs per pod, one process each", cxxopts::value<std::string>())
      ("cpu", "CPU per pod, such as 8", cxxopts::value<std::string>())
      ("memory", "memory per pod, such as 32Gi", cxxopts::value<std::string>())
      ("shm-size", "size limit of /dev/shm", cxxopts::value<std::string>())
      ("scratch", "node directory for checkouts and caches", cxxopts::value<std::string>())
      ("secret", "Secret holding TRAINPOINT_GIT_TOKEN / AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
       cxxopts::value<std::string>())
      ("vault-role", "Vault role for the platform's Vault agent", cxxopts::value<std::string>())
      ("vault-tenant", "MinIO tenant of the Vault secret", cxxopts::value<std::string>())
      ("vault-path", "Vault path of the MinIO keys", cxxopts::value<std::string>())
      ("checkout", "local working tree of --repo to read --spec from (default: .)", cxxopts::value<std::string>())
      ("o,output", "write the manifest to this file instead of stdout", cxxopts::value<std::string>());

  Options options;
  options.help_text = parser.help();
  if (argc < 2) return options;
  options.command = command_named(argv[1]);
  options.arguments.assign(argv + 1, argv + argc);
  if (options.command == Command::s3) {
    // The s3 command parses its own words (docs/s3.md).
    options.s3_arguments.assign(argv + 2, argv + argc);
    return options;
  }

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

  auto flag = [&](const char* name, const char* env) {
    const std::string value = from_env(env);
    return parsed.count(name) > 0 || value == "1" || value == "true";
  };
  git::CheckoutRequest& git = options.git;
  git.expect_sha = option("expect-sha", "TRAINPOINT_EXPECT_SHA");
  git.cache_dir = option("git-cache", "TRAINPOINT_GIT_CACHE");
  git.token_file = option("git-token-file", "TRAINPOINT_GIT_TOKEN_FILE");
  git.username = option("git-user", "TRAINPOINT_GIT_USER");
  git.ca_bundle = option("ca-bundle", "TRAINPOINT_CA_BUNDLE");
  git.ssh_key = option("ssh-key", "TRAINPOINT_SSH_KEY");
  git.known_hosts = option("known-hosts", "TRAINPOINT_KNOWN_HOSTS");
  git.accept_unknown_host = flag("accept-unknown-host", "TRAINPOINT_ACCEPT_UNKNOWN_HOST");
  git.submodules = !flag("no-submodules", "TRAINPOINT_NO_SUBMODULES");
  git.lfs = !flag("no-lfs", "TRAINPOINT_NO_LFS");
  options.preflight = !flag("no-preflight", "TRAINPOINT_NO_PREFLIGHT");
  if (const std::string timeout = option("git-timeout", "TRAINPOINT_GIT_TIMEOUT"); !timeout.empty()) {
    char* end = nullptr;
    const long seconds = std::strtol(timeout.c_str(), &end, 10);
    if (end == timeout.c_str() || *end != '\0' || seconds < 1) {
      fail(ExitCode::usage, "--git-timeout: '{}' is not a number of seconds", timeout);
    }
    git.network_timeout = std::chrono::seconds(seconds);
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

  // Flags become TOML assignments: numbers as they are, everything else as a quoted string.
  const std::vector<std::pair<const char*, const char*>> k8s_flags{
      {"kind", "kind"}, {"name", "name"}, {"namespace", "namespace"}, {"image", "image"}, {"workers", "workers"},
      {"gpus", "gpus_per_worker"}, {"cpu", "cpu"}, {"memory", "memory"}, {"shm-size", "shm_size"},
      {"scratch", "scratch"}, {"secret", "secret"}, {"vault-role", "vault_role"}, {"vault-tenant", "vault_tenant"},
      {"vault-path", "vault_path"}};
  for (const auto& [flag, key] : k8s_flags) {
    if (!parsed.count(flag)) continue;
    const std::string value = parsed[flag].as<std::string>();
    const bool number = std::string(flag) == "workers" || std::string(flag) == "gpus";
    if (!number && value.find_first_of("\"\\\n") != std::string::npos) {
      fail(ExitCode::usage, "--{}: '{}' holds a quote, backslash or newline", flag, value);
    }
    options.k8s_overrides.push_back(std::string("k8s.") + key + "=" + (number ? value : "\"" + value + "\""));
  }
  options.checkout = parsed.count("checkout") ? parsed["checkout"].as<std::string>() : ".";
  if (parsed.count("output")) options.manifest_file = parsed["output"].as<std::string>();

  const bool needs_spec = options.command == Command::run || options.command == Command::preflight ||
                          options.command == Command::check ||
                          options.command == Command::render_job;
  if (needs_spec && options.spec.empty()) {
    fail(ExitCode::usage, "--spec is required: the spec's path in the repository (or a local file without --repo)");
  }
  if (!options.ref.empty() && options.repo.empty()) {
    fail(ExitCode::usage, "--ref {} needs --repo: the repository to check it out from", options.ref);
  }
  return options;
}

}  // namespace tp::cli
