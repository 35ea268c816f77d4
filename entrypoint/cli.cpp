#include "cli.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <tuple>
// --set values are whole TOML values such as data.augment=["flip","random_resized_crop"]: a repeated
// option, never split at commas.
#define CXXOPTS_VECTOR_DELIMITER '\n'
#include <cxxopts.hpp>
#include <sstream>

#include "common/cpu.h"
#include "common/error.h"
#include "common/files.h"
#include "git/remote_url.h"
#include "git/working_tree.h"
#include "spec/spec.h"

namespace tp::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kEnvironmentAndExits = R"(
Every option of run, preflight and check can also be set with an environment variable, shown after it (the
command line wins). TRAINPOINT_SET holds several KEY=VALUE separated by newlines or ';'.
Exit codes: 0 success; 1-127 permanent failures; 128-255 retryable failures (docs/exit-codes.md).
)";

constexpr const char* kOverview = R"(usage: trainpoint COMMAND [options]     (trainpoint COMMAND --help shows its options)

Distributed PyTorch-style training from a git repository (docs/cli.md, docs/guide.md).

Commands:
  run             clone --repo at --ref, read --spec from it, stage the data and train
  preflight       check what run needs (ref, spec, data, output, GPUs, master, disk) and print a table
  check           validate a spec and print it resolved, with where each value came from
  render-job      print a Kubernetes PyTorchJob (or TrainJob) running --spec of --repo at --ref
  submit          create that job on the cluster (a kubeconfig, or the notebook pod's service account)
  list            the namespace's trainpoint jobs and their phases
  status          a job's phase, conditions and pods, the last exit of each explained
  logs            a rank's log (rank 0 by default), --follow to keep reading
  cancel          delete a job; its pods get their grace period to write a checkpoint
  s3 ls|cp|sync   list and copy S3 objects with trainpoint's client
  make-dataset    write a synthetic image folder or CSV table to try trainpoint with
  pack            pack an image folder or image CSV into tar shards for data.format = "shards"
  predict         apply a trained model.pt to new data and write its predictions (CSV or JSON lines)
  export          write a trained model.pt as ONNX, with its classes and preprocessing in the metadata
  spec-reference  print the reference of every spec setting (docs/spec.md)
  version         print trainpoint's version and the libraries it was built with (also --version)
)";

// What `trainpoint COMMAND --help` says before the command's options.
struct CommandText {
  Command command;
  const char* name;
  const char* usage;
  const char* summary;
};

constexpr CommandText kCommands[] = {
    {Command::run, "run",
     "usage: trainpoint run --repo URL|PATH [--ref SHA|BRANCH|TAG] --spec PATH_IN_REPO [options]\n"
     "       trainpoint run --spec LOCAL_FILE [options]",
     "Clones --repo at --ref, reads --spec from it, runs the preflight checks, stages the data and trains: with\n"
     "dist.nproc_per_node workers on this node, or as one rank of a job that a launcher started."},
    {Command::preflight, "preflight",
     "usage: trainpoint preflight --repo URL|PATH [--ref SHA|BRANCH|TAG] --spec PATH_IN_REPO [options]\n"
     "       trainpoint preflight --spec LOCAL_FILE [options]",
     "Runs the checks that start every run (ref, spec, data, output, GPUs, master, disk, /dev/shm) and prints\n"
     "them as a table (docs/reliability.md). Takes the arguments of run."},
    {Command::check, "check",
     "usage: trainpoint check FILE [options]\n"
     "       trainpoint check [--repo URL|PATH [--ref SHA|BRANCH|TAG]] --spec PATH [options]",
     "Validates a spec (every error at once) and prints it resolved, each value with where it came from: a\n"
     "default, FILE:LINE:COL or --set. With --repo, the spec as committed at --ref, as run reads it."},
    {Command::render_job, "render-job",
     "usage: trainpoint render-job --repo URL --ref SHA --spec PATH_IN_REPO [options]",
     "Prints a Kubeflow PyTorchJob (or with --kind trainjob a Trainer v2 TrainJob) whose pods run\n"
     "trainpoint run for --repo at --ref with --spec. The spec is read and validated from the local working\n"
     "tree (--checkout); each flag below sets the k8s.* setting of the same name (docs/cli.md)."},
    {Command::submit, "submit",
     "usage: trainpoint submit --repo URL --ref SHA --spec PATH_IN_REPO [options]",
     "Creates the job render-job would print on the Kubernetes cluster: the one of --kubeconfig (else\n"
     "KUBECONFIG, ~/.kube/config, or the service account of the pod it runs in, such as a notebook's), in\n"
     "k8s.namespace, --namespace or the context's namespace. --dry-run=server has the server check it (schemas,\n"
     "CEL rules, RBAC, quota, admission) without creating it. A refusal is one line with the server's reason."},
    {Command::list_jobs, "list", "usage: trainpoint list [--namespace NS] [--kubeconfig FILE]",
     "Lists the namespace's jobs that trainpoint submitted, oldest first, with their phases."},
    {Command::status, "status", "usage: trainpoint status [JOB] [--namespace NS] [--kubeconfig FILE]",
     "Shows a job (default: the newest trainpoint job): its phase and conditions, what it trains, and each pod\n"
     "by node rank with its state, restarts and last exit code explained (docs/exit-codes.md)."},
    {Command::logs, "logs",
     "usage: trainpoint logs [JOB] [--rank N] [--follow] [--previous] [--namespace NS] [--kubeconfig FILE]",
     "Prints the log of the pod of node rank N (default 0, the master) of a job (default: the newest)."},
    {Command::cancel, "cancel", "usage: trainpoint cancel JOB [--namespace NS] [--kubeconfig FILE]",
     "Deletes the job. Its pods are stopped with SIGTERM and their grace period (k8s.grace_s) to write a\n"
     "checkpoint, then killed."},
    {Command::pack, "pack", "usage: trainpoint pack SRC DEST [options]",
     "Packs an image_folder or image_csv source (a local path or s3://bucket/prefix) into tar shards and\n"
     "index.json at DEST (a local directory or s3://bucket/prefix), for data.format = \"shards\"\n"
     "(docs/s3.md, \"Packed shards\")."},
    {Command::s3, "s3",
     "usage: trainpoint s3 ls s3://bucket[/prefix] [--recursive]\n"
     "       trainpoint s3 cp SOURCE DESTINATION [--recursive] [--verbose]   (one side s3://, the other "
     "local)\n"
     "       trainpoint s3 sync SOURCE DESTINATION                (s3:// prefix <-> local directory)",
     "Lists and copies S3 objects with trainpoint's client (docs/s3.md, \"Command line\").\n"
     "Exit codes: 0 success; 2 bad arguments; 1-127 permanent failures; 128-255 retryable "
     "(docs/exit-codes.md)."},
    {Command::make_dataset, "make-dataset",
     "usage: trainpoint make-dataset images --out DIR [options]\n"
     "       trainpoint make-dataset table --out FILE.csv [options]",
     "Learnable synthetic datasets: `images` (an image folder of shapes, one subdirectory per class) or\n"
     "`table` (a CSV). The same arguments give the same bytes."},
    {Command::predict, "predict", "usage: trainpoint predict --model MODEL.pt --data DATA --out FILE [options]",
     "Applies a model.pt that trainpoint saved to new data: images (a file, or a folder of them; class\n"
     "subfolders are their labels) or a CSV table with the model's columns; each local or s3://. The inputs are\n"
     "made as the model was trained to read them. Writes one file (local or s3://) of predictions: the sample,\n"
     "the class and its probability and the top k (or the value), and the label where the data has it. As one\n"
     "pod of a job (RANK and WORLD_SIZE), it predicts its share; a killed run resumes without redoing written\n"
     "parts (docs/training.md, \"Predictions\")."},
    {Command::export_model, "export", "usage: trainpoint export --model MODEL.pt --onnx FILE.onnx [options]",
     "Writes a model.pt that trainpoint saved (local or s3://) as an ONNX file for runtimes without PyTorch, with\n"
     "the model's task, classes and preprocessing in its metadata. PyTorch's exporter runs in --python, which\n"
     "needs torch and onnx (the cpu image's python3 has both) (docs/training.md, \"ONNX\")."},
    {Command::spec_reference, "spec-reference", "usage: trainpoint spec-reference",
     "Prints the reference of every spec setting, its type, default and bounds (docs/spec.md)."},
    {Command::version, "version", "usage: trainpoint version    (or trainpoint --version)",
     "Prints trainpoint's version and the libraries it was built with."},
};

const CommandText* command_text(const std::string& name) {
  for (const CommandText& text : kCommands) {
    if (name == text.name) return &text;
  }
  return nullptr;
}

std::string from_env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

[[noreturn]] void unknown_command(const std::string& name) {
  fail(ExitCode::usage, "unknown command '{}': expected run, preflight, check, render-job, submit, list, status, "
       "logs, cancel, s3, make-dataset, pack, predict, export, spec-reference or version (see trainpoint --help)",
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

// `path` absolute and normalised, so that logs and records name one path (not .../moons/../moons-run/ or ./.).
std::string absolute(const std::string& path) {
  fs::path normal = fs::absolute(path).lexically_normal();
  if (!normal.has_filename() && normal.has_relative_path()) normal = normal.parent_path();  // "/a/b/" -> "/a/b"
  return normal.string();
}

// `trainpoint pack`'s options: SRC and DEST, and what a spec's [data] would say of the source.
void add_pack_options(cxxopts::Options& parser, std::vector<std::string>& groups) {
  parser.add_options()("source", "SRC", cxxopts::value<std::string>())
      ("destination", "DEST", cxxopts::value<std::string>());
  parser.parse_positional({"source", "destination"});
  groups.push_back("pack");
  parser.add_options("pack")
      ("format", "image_folder or image_csv", cxxopts::value<std::string>()->default_value("image_folder"))
      ("target", "image_csv: the label column", cxxopts::value<std::string>()->default_value("label"))
      ("task", "classification or regression", cxxopts::value<std::string>()->default_value("classification"))
      ("valid", "the share held out for validation, as data.valid (a source with train/ and valid/ folders "
       "is split by them)", cxxopts::value<double>()->default_value("0.2"))
      ("valid-source", "separate validation data, as data.valid_source", cxxopts::value<std::string>())
      ("shard-size-mb", "the size shards are cut at", cxxopts::value<double>()->default_value("256"))
      ("seed", "the order of the samples in the shards, and the validation split (job.seed gives the same "
       "split)", cxxopts::value<std::uint64_t>()->default_value("42"))
      ("workers", "shards written at once (default: the CPUs usable)", cxxopts::value<int>())
      ("endpoint", "the S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, S3_ENDPOINT_URL, "
       "MINIO_URL)", cxxopts::value<std::string>())
      ("credentials", "an S3 credentials file (default: the chain of docs/s3.md)",
       cxxopts::value<std::string>())
      ("workdir", "temporary files (an s3:// source staged, shards before their upload)",
       cxxopts::value<std::string>());
}

// The S3 connection's options (s3, predict).
void add_connection_options(cxxopts::Options& parser, const std::string& group) {
  parser.add_options(group)
      ("endpoint", "the S3 endpoint (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, S3_ENDPOINT_URL, "
       "MINIO_URL, else AWS)", cxxopts::value<std::string>(), "URL")
      ("region", "the signing region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else "
       "us-east-1)", cxxopts::value<std::string>(), "NAME")
      ("credentials", "keys from this file (shell export lines or JSON); default: the chain of docs/s3.md",
       cxxopts::value<std::string>(), "FILE")
      ("tenant", "the MinIO tenant whose Vault secret /vault/secrets/minio-NAME holds the keys",
       cxxopts::value<std::string>(), "NAME")
      ("ca-bundle", "PEM file of extra CAs trusted for HTTPS", cxxopts::value<std::string>(), "FILE");
}

// `trainpoint s3`'s options: the verb and its paths, what the S3 connection and transfers are.
void add_s3_options(cxxopts::Options& parser, std::vector<std::string>& groups) {
  parser.add_options()("verb", "ls, cp or sync", cxxopts::value<std::string>())
      ("paths", "the URL, or SOURCE and DESTINATION", cxxopts::value<std::vector<std::string>>());
  parser.parse_positional({"verb", "paths"});
  groups.push_back("s3");
  parser.add_options("s3")
      ("r,recursive", "ls: every key under the prefix; cp: a whole directory or prefix (verified; same files "
       "skipped)")
      ("v,verbose", "cp, sync: a line per file uploaded (by default a progress line on a terminal, then a "
       "summary: files, bytes, seconds)")
      ("parallelism", "transfers in flight (default 16)", cxxopts::value<int>(), "N")
      ("part-size-mib", "multipart part size in MiB (default 8)", cxxopts::value<int>(), "N");
  add_connection_options(parser, "s3");
}

// `trainpoint make-dataset`'s options: the kind, where it goes and what it holds.
void add_make_dataset_options(cxxopts::Options& parser, std::vector<std::string>& groups) {
  parser.add_options()("kind", "images or table", cxxopts::value<std::string>());
  parser.parse_positional({"kind"});
  groups.push_back("make-dataset");
  parser.add_options("make-dataset")
      ("out", "output directory (images) or CSV file (table)", cxxopts::value<std::string>())
      ("classes", "image classes (shapes), 2-8", cxxopts::value<int>()->default_value("3"))
      ("per-class", "images per class", cxxopts::value<int>()->default_value("60"))
      ("count", "total images (overrides --per-class)", cxxopts::value<int>())
      ("size", "image size: N or WxH", cxxopts::value<std::string>()->default_value("32"))
      ("format", "png, jpeg or mixed", cxxopts::value<std::string>()->default_value("png"))
      ("channels", "1 (gray) or 3 (RGB)", cxxopts::value<int>()->default_value("3"))
      ("rows", "table rows", cxxopts::value<int>()->default_value("1000"))
      ("task", "table: classification or regression",
       cxxopts::value<std::string>()->default_value("classification"))
      ("seed", "random seed", cxxopts::value<std::uint64_t>()->default_value("1"));
}

// `trainpoint predict`'s options: the model, the data, where the predictions go and what they hold.
void add_predict_options(cxxopts::Options& parser, std::vector<std::string>& groups) {
  groups.push_back("predict");
  parser.add_options("predict")
      ("model", "the model.pt (local or s3://)", cxxopts::value<std::string>(), "MODEL")
      ("data", "images (a file or folder) or a CSV file (local or s3://)", cxxopts::value<std::string>(), "DATA")
      ("out", "the predictions file (local or s3://)", cxxopts::value<std::string>(), "FILE")
      ("format", "csv or jsonl (default: from --out's extension, else csv)", cxxopts::value<std::string>())
      ("top-k", "classes given with their probability", cxxopts::value<int>()->default_value("3"), "K")
      ("batch-size", "samples per forward pass", cxxopts::value<int>()->default_value("64"), "N")
      ("workers", "threads decoding images", cxxopts::value<int>()->default_value("2"), "N")
      ("id-column", "tables: the column that names each row (default: FILE:LINE)", cxxopts::value<std::string>(),
       "NAME")
      ("label-column", "tables and image CSVs: the true class or value, for the accuracy or error (image CSVs: "
       "default 'label' where there)", cxxopts::value<std::string>(), "NAME")
      ("max-bad-files", "unreadable images skipped before failing", cxxopts::value<int>()->default_value("0"), "N")
      ("part-size", "samples per part: at most what a killed run redoes", cxxopts::value<int>()->default_value("1024"),
       "N")
      ("wait-for-parts", "rank 0 waits this many seconds for the other ranks' parts",
       cxxopts::value<int>()->default_value("1800"), "SECONDS")
      ("workdir", "an s3:// model and data downloaded, parts before their upload (env TRAINPOINT_WORKDIR; default: .)",
       cxxopts::value<std::string>());
  add_connection_options(parser, "predict");
}

// `trainpoint export`'s options.
void add_export_options(cxxopts::Options& parser, std::vector<std::string>& groups) {
  groups.push_back("export");
  parser.add_options("export")
      ("model", "the model.pt (local or s3://)", cxxopts::value<std::string>(), "MODEL")
      ("onnx", "the ONNX file to write", cxxopts::value<std::string>(), "FILE")
      ("python", "the Python with torch and onnx that exports it", cxxopts::value<std::string>()->default_value("python3"),
       "PYTHON")
      ("opset", "the ONNX opset", cxxopts::value<int>()->default_value("17"), "N")
      ("workdir", "an s3:// model downloaded (env TRAINPOINT_WORKDIR; default: .)", cxxopts::value<std::string>());
  add_connection_options(parser, "export");
}

// render-job's flags, each the [k8s] key of the same name (docs/guide.md).
void add_render_job_options(cxxopts::Options& parser, std::vector<std::string>& groups) {
  groups.push_back("render-job");
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
      ("scratch", "node directory for checkouts, caches and a relative job.output",
       cxxopts::value<std::string>())
      ("secret", "Secret holding TRAINPOINT_GIT_TOKEN / AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
       cxxopts::value<std::string>())
      ("vault-role", "Vault role for the platform's Vault agent", cxxopts::value<std::string>())
      ("vault-tenant", "MinIO tenant of the Vault secret", cxxopts::value<std::string>())
      ("vault-path", "Vault path of the MinIO keys", cxxopts::value<std::string>())
      ("checkout", "local working tree of --repo to read --spec from (default: .)",
       cxxopts::value<std::string>())
      ("o,output", "write the manifest to this file instead of stdout", cxxopts::value<std::string>())
      ("predict", "a prediction job: its pods run `trainpoint predict` with these options (split at spaces), such "
       "as \"--model s3://m/model.pt --data s3://d/new --out s3://p/new.csv\"", cxxopts::value<std::string>(),
       "OPTIONS");
}

bool talks_to_cluster(Command command) {
  return command == Command::submit || command == Command::list_jobs || command == Command::status ||
         command == Command::logs || command == Command::cancel;
}

// The cluster's options, and the job's name as a positional word where the command takes one.
void add_cluster_options(cxxopts::Options& parser, std::vector<std::string>& groups, Command command) {
  groups.push_back("cluster");
  parser.add_options("cluster")
      ("kubeconfig", "the kubeconfig (default: env KUBECONFIG, ~/.kube/config, else the pod's service account)",
       cxxopts::value<std::string>(), "FILE")
      ("context", "the kubeconfig's context (default: its current-context)", cxxopts::value<std::string>());
  if (command == Command::submit) {
    parser.add_options("cluster")("dry-run", "server: have the API server validate the job without creating it",
                                  cxxopts::value<std::string>(), "server");
    return;
  }
  parser.add_options("cluster")("namespace", "the namespace (default: the context's)", cxxopts::value<std::string>());
  if (command == Command::list_jobs) return;
  parser.add_options()("job", "the job", cxxopts::value<std::string>());
  parser.parse_positional({"job"});
  if (command != Command::logs) return;
  parser.add_options("cluster")
      ("rank", "the node rank whose pod's log is shown (0: the master)", cxxopts::value<int>()->default_value("0"), "N")
      ("f,follow", "wait for the pod to start, then keep printing as the log grows, until the container ends")
      ("previous", "the log of the container's run before its last restart");
}

// The options of `command`, in groups that its help lists in this order.
cxxopts::Options command_parser(Command command, std::vector<std::string>& groups) {
  cxxopts::Options parser("trainpoint");
  parser.custom_help("");
  parser.positional_help("");
  parser.set_width(110);
  parser.add_options()("h,help", "show this help");
  const bool trains = command == Command::run || command == Command::preflight || command == Command::check;
  if (trains || command == Command::render_job || command == Command::submit) {
    groups.push_back("main");
    parser.add_options("main")
        ("repo", "git repository: URL or local path (env TRAINPOINT_REPO)", cxxopts::value<std::string>())
        ("ref", "commit SHA, branch or tag to check out (env TRAINPOINT_REF)", cxxopts::value<std::string>())
        ("spec", "spec path inside the repository, or a local file without --repo (env TRAINPOINT_SPEC)",
         cxxopts::value<std::string>())
        ("set", "override a spec value, KEY=VALUE (a whole TOML value: lists work); repeatable (env "
         "TRAINPOINT_SET)", cxxopts::value<std::vector<std::string>>());
  }
  if (trains) {
    parser.add_options("main")
        ("nproc-per-node", "worker processes on this node, a number or auto: dist.nproc_per_node, as torchrun's "
         "option (env TRAINPOINT_NPROC_PER_NODE)", cxxopts::value<std::string>())
        ("workdir", "directory for checkouts, caches and a relative job.output (env TRAINPOINT_WORKDIR; default: "
         "., or ./.trainpoint inside a git working tree)", cxxopts::value<std::string>());
    groups.push_back("git");
    parser.add_options("git")
        ("expect-sha", "fail unless --ref resolves to this commit (env TRAINPOINT_EXPECT_SHA)",
         cxxopts::value<std::string>())
        ("git-cache", "node-local directory of git mirrors, shared by runs and ranks (env TRAINPOINT_GIT_CACHE)",
         cxxopts::value<std::string>())
        ("git-token-file", "file holding an HTTPS token or password (env TRAINPOINT_GIT_TOKEN_FILE); "
         "or put the token itself in env TRAINPOINT_GIT_TOKEN", cxxopts::value<std::string>())
        ("git-user", "HTTPS user name for the token (env TRAINPOINT_GIT_USER)", cxxopts::value<std::string>())
        ("ca-bundle", "PEM file of extra trusted CAs for HTTPS (env TRAINPOINT_CA_BUNDLE)",
         cxxopts::value<std::string>())
        ("ssh-key", "SSH private key file (env TRAINPOINT_SSH_KEY)", cxxopts::value<std::string>())
        ("known-hosts", "known_hosts file for SSH host-key checks (env TRAINPOINT_KNOWN_HOSTS)",
         cxxopts::value<std::string>())
        ("accept-unknown-host", "accept an SSH host missing from known_hosts, with a warning "
         "(env TRAINPOINT_ACCEPT_UNKNOWN_HOST=1)")
        ("no-submodules", "do not check out submodules (env TRAINPOINT_NO_SUBMODULES=1)")
        ("no-lfs", "leave Git LFS pointers as they are (env TRAINPOINT_NO_LFS=1)")
        ("git-timeout", "seconds transient network failures are retried (env TRAINPOINT_GIT_TIMEOUT)",
         cxxopts::value<std::string>());
  }
  if (command == Command::run) {
    parser.add_options("main")("no-preflight", "skip the preflight checks (env TRAINPOINT_NO_PREFLIGHT=1)");
  }
  if (command == Command::check) {
    parser.add_options()("file", "the spec file", cxxopts::value<std::string>());
    parser.parse_positional({"file"});
  }
  if (command == Command::render_job || command == Command::submit) add_render_job_options(parser, groups);
  if (talks_to_cluster(command)) add_cluster_options(parser, groups, command);
  if (command == Command::pack) add_pack_options(parser, groups);
  if (command == Command::s3) add_s3_options(parser, groups);
  if (command == Command::make_dataset) add_make_dataset_options(parser, groups);
  if (command == Command::predict) add_predict_options(parser, groups);
  if (command == Command::export_model) add_export_options(parser, groups);
  if (trains || command == Command::render_job || command == Command::predict || command == Command::export_model ||
      talks_to_cluster(command)) {
    groups.push_back("logging");
    parser.add_options("logging")
        ("log-format", "text or json (env TRAINPOINT_LOG_FORMAT)", cxxopts::value<std::string>())
        ("log-level", "trace, debug, info, warn or error (env TRAINPOINT_LOG_LEVEL)", cxxopts::value<std::string>());
  }
  return parser;
}

// `trainpoint COMMAND --help`: its usage, what it does and its options.
std::string command_help(const CommandText& text, const cxxopts::Options& parser,
                         const std::vector<std::string>& groups) {
  std::string help = fmt::format("{}\n\n{}\n", text.usage, text.summary);
  if (!groups.empty()) {
    const std::string options = parser.help(groups, /*print_usage=*/false);
    help += options.substr(options.find_first_not_of('\n') - 1);  // one blank line before the groups
  }
  const bool reads_environment =
      text.command == Command::run || text.command == Command::preflight || text.command == Command::check;
  if (reads_environment) help += kEnvironmentAndExits;
  return help;
}

// The working directory without --workdir: the current directory, unless that is inside a git working tree
// (the user's repository, where checkouts/ and output/ would be added by the next `git add -A`): then its
// .trainpoint, made if `make` with a .gitignore that keeps it out of the repository.
std::string default_workdir(bool make) {
  const auto repository = git::enclosing_working_tree(fs::current_path());
  if (!repository) return fs::current_path().string();
  const fs::path workdir = fs::current_path() / ".trainpoint";
  if (!make) return workdir.string();
  std::error_code error;
  fs::create_directories(workdir, error);
  if (!error && !fs::exists(workdir / ".gitignore")) write_file_atomic(workdir / ".gitignore", "# made by trainpoint\n*\n");
  return workdir.string();
}

// The value of option `name`, else of the environment variable `env` ("" when neither is set).
std::string option(const cxxopts::ParseResult& parsed, const char* name, const char* env) {
  return parsed.count(name) ? parsed[name].as<std::string>() : from_env(env);
}

// A flag given, or its environment variable set to 1 or true.
bool flag(const cxxopts::ParseResult& parsed, const char* name, const char* env) {
  const std::string value = from_env(env);
  return parsed.count(name) > 0 || value == "1" || value == "true";
}

// The choice `word` names among `allowed`, by the spec's names of choices; else a usage error naming them:
// "`what` `word`: a, b or c".
template <typename Choice, std::size_t N>
Choice choice_among(const char* what, const std::string& word, const std::array<Choice, N>& allowed) {
  const auto choice = spec::parse_choice<Choice>(word);
  if (choice && std::find(allowed.begin(), allowed.end(), *choice) != allowed.end()) return *choice;
  std::string names(spec::name(allowed.front()));
  for (std::size_t i = 1; i < N; ++i) {
    names += fmt::format("{}{}", i + 1 < N ? ", " : " or ", spec::name(allowed[i]));
  }
  fail(ExitCode::usage, "{} {}: {}", what, word, names);
}

// Every choice of `Choice`, in the order of its names.
template <typename Choice>
auto every_choice() {
  constexpr std::size_t count = choice_names(Choice{}).size();
  std::array<Choice, count> choices{};
  for (std::size_t i = 0; i < count; ++i) choices[i] = static_cast<Choice>(i);
  return choices;
}

// The words after the program name, parsed as `name`'s options.
cxxopts::ParseResult parse_words(cxxopts::Options& parser, int argc, char** argv, const std::string& name) {
  cxxopts::ParseResult parsed;
  try {
    parsed = parser.parse(argc - 1, argv + 1);
  } catch (const cxxopts::exceptions::exception& error) {
    fail(ExitCode::usage, "{} (see trainpoint {} --help)", error.what(), name);
  }
  if (!parsed.unmatched().empty()) {
    fail(ExitCode::usage, "unexpected argument '{}' (see trainpoint {} --help)", parsed.unmatched().front(), name);
  }
  return parsed;
}

storage::PackRequest pack_request(const cxxopts::ParseResult& parsed) {
  storage::PackRequest request;
  request.destination = parsed["destination"].as<std::string>();
  spec::DataSpec& data = request.data;
  data.source = parsed["source"].as<std::string>();
  data.format = choice_among("--format", parsed["format"].as<std::string>(),
                             std::array{spec::DataFormat::image_folder, spec::DataFormat::image_csv});
  data.task = choice_among("--task", parsed["task"].as<std::string>(),
                           std::array{spec::Task::classification, spec::Task::regression});
  data.target = parsed["target"].as<std::string>();
  data.valid = parsed["valid"].as<double>();
  if (data.valid < 0 || data.valid > 0.9) fail(ExitCode::usage, "--valid {}: 0 to 0.9", data.valid);
  if (parsed.count("valid-source")) data.valid_source = parsed["valid-source"].as<std::string>();
  if (parsed.count("endpoint")) data.endpoint = parsed["endpoint"].as<std::string>();
  if (parsed.count("credentials")) data.credentials = parsed["credentials"].as<std::string>();
  const double shard_mb = parsed["shard-size-mb"].as<double>();
  if (!(shard_mb >= 0.0625 && shard_mb <= 1e6)) {
    fail(ExitCode::usage, "--shard-size-mb {}: 0.0625 to 1000000", shard_mb);
  }
  request.shard_bytes = static_cast<std::uint64_t>(shard_mb * (1 << 20));
  request.seed = parsed["seed"].as<std::uint64_t>();
  request.workers = parsed.count("workers") ? parsed["workers"].as<int>() : usable_cores();
  if (request.workers < 1) fail(ExitCode::usage, "--workers {}: at least 1", request.workers);
  if (parsed.count("workdir")) request.workdir = parsed["workdir"].as<std::string>();
  return request;
}

// A number option's value, at least 1.
int positive(const cxxopts::ParseResult& parsed, const char* name) {
  const int value = parsed[name].as<int>();
  if (value < 1) fail(ExitCode::usage, "--{} {}: at least 1", name, value);
  return value;
}

// What add_connection_options() read.
s3::ConnectionOptions connection_options(const cxxopts::ParseResult& parsed) {
  s3::ConnectionOptions connection;
  const std::pair<const char*, std::string*> options[] = {
      {"endpoint", &connection.endpoint}, {"region", &connection.region},
      {"credentials", &connection.credentials_file}, {"tenant", &connection.tenant},
      {"ca-bundle", &connection.ca_bundle}};
  for (const auto& [name, value] : options) {
    if (parsed.count(name)) *value = parsed[name].as<std::string>();
  }
  return connection;
}

s3::S3Command s3_command(const cxxopts::ParseResult& parsed) {
  s3::S3Command command;
  command.verb = choice_among("s3", parsed["verb"].as<std::string>(), every_choice<s3::Verb>());
  const auto paths = parsed.count("paths") ? parsed["paths"].as<std::vector<std::string>>()
                                           : std::vector<std::string>();
  const bool lists = command.verb == s3::Verb::ls;
  if (paths.size() != (lists ? 1u : 2u)) {
    fail(ExitCode::usage, "s3 {} takes {} (see trainpoint s3 --help)", spec::name(command.verb),
         lists ? "one s3:// URL" : "SOURCE and DESTINATION");
  }
  command.source = paths.front();
  if (!lists) command.destination = paths.back();
  command.recursive = parsed.count("recursive") > 0;
  command.verbose = parsed.count("verbose") > 0;
  command.connection = connection_options(parsed);
  if (parsed.count("parallelism")) command.transfer.parallelism = positive(parsed, "parallelism");
  if (parsed.count("part-size-mib")) {
    command.transfer.part_size = static_cast<std::uint64_t>(positive(parsed, "part-size-mib")) << 20;
  }
  return command;
}

storage::PredictRequest predict_request(const cxxopts::ParseResult& parsed) {
  storage::PredictRequest request;
  request.model = parsed["model"].as<std::string>();
  request.data = parsed["data"].as<std::string>();
  request.out = parsed["out"].as<std::string>();
  const std::string extension = fs::path(request.out).extension().string();
  const bool json_lines = extension == ".jsonl" || extension == ".json";
  request.format = parsed.count("format") ? choice_among("--format", parsed["format"].as<std::string>(),
                                                         every_choice<storage::PredictionFormat>())
                                          : (json_lines ? storage::PredictionFormat::jsonl : storage::PredictionFormat::csv);
  request.top_k = positive(parsed, "top-k");
  request.batch_size = positive(parsed, "batch-size");
  request.workers = parsed["workers"].as<int>();
  if (request.workers < 0) fail(ExitCode::usage, "--workers {}: 0 or more", request.workers);
  if (parsed.count("id-column")) request.id_column = parsed["id-column"].as<std::string>();
  if (parsed.count("label-column")) request.label_column = parsed["label-column"].as<std::string>();
  request.max_bad_files = parsed["max-bad-files"].as<int>();
  if (request.max_bad_files < 0) fail(ExitCode::usage, "--max-bad-files {}: 0 or more", request.max_bad_files);
  request.part_size = positive(parsed, "part-size");
  request.wait_for_parts = std::chrono::seconds(positive(parsed, "wait-for-parts"));
  request.connection = connection_options(parsed);
  const std::string workdir = option(parsed, "workdir", "TRAINPOINT_WORKDIR");
  request.workdir = workdir.empty() ? fs::current_path() : fs::path(absolute(workdir));
  return request;
}

ExportOptions export_options(const cxxopts::ParseResult& parsed) {
  ExportOptions options;
  options.model = parsed["model"].as<std::string>();
  options.onnx = parsed["onnx"].as<std::string>();
  options.python = parsed["python"].as<std::string>();
  options.opset = parsed["opset"].as<int>();
  if (options.opset < 7 || options.opset > 30) fail(ExitCode::usage, "--opset {}: 7 to 30", options.opset);
  options.connection = connection_options(parsed);
  const std::string workdir = option(parsed, "workdir", "TRAINPOINT_WORKDIR");
  options.workdir = workdir.empty() ? fs::current_path().string() : absolute(workdir);
  return options;
}

// --size: N (a square) or WxH.
std::pair<int, int> image_size(const std::string& text) {
  int width = 0, height = 0;
  if (std::sscanf(text.c_str(), "%dx%d", &width, &height) == 2 && width > 0 && height > 0) {
    return {width, height};
  }
  if (std::sscanf(text.c_str(), "%d", &width) == 1 && width > 0) return {width, width};
  fail(ExitCode::usage, "--size: '{}' is not N or WxH", text);
}

data::MakeDatasetRequest make_dataset_request(const cxxopts::ParseResult& parsed) {
  data::MakeDatasetRequest request;
  request.kind =
      choice_among("make-dataset", parsed["kind"].as<std::string>(), every_choice<data::DatasetKind>());
  request.out = parsed["out"].as<std::string>();
  request.classes = parsed["classes"].as<int>();
  request.count =
      parsed.count("count") ? parsed["count"].as<int>() : request.classes * parsed["per-class"].as<int>();
  std::tie(request.width, request.height) = image_size(parsed["size"].as<std::string>());
  request.format =
      choice_among("--format", parsed["format"].as<std::string>(), every_choice<data::ImageFileFormat>());
  request.channels = parsed["channels"].as<int>();
  request.rows = parsed["rows"].as<int>();
  request.task = choice_among("--task", parsed["task"].as<std::string>(),
                              std::array{spec::Task::classification, spec::Task::regression});
  request.seed = parsed["seed"].as<std::uint64_t>();
  return request;
}

// --repo, --ref, --spec (or check's FILE), --set, --nproc-per-node and --workdir.
void read_spec_options(const cxxopts::ParseResult& parsed, Options& options) {
  options.repo = option(parsed, "repo", "TRAINPOINT_REPO");
  options.ref = option(parsed, "ref", "TRAINPOINT_REF");
  options.spec = option(parsed, "spec", "TRAINPOINT_SPEC");
  if (parsed.count("file")) {
    if (parsed.count("spec")) fail(ExitCode::usage, "check: give the spec as FILE or as --spec, not both");
    options.spec = parsed["file"].as<std::string>();
  }
  options.overrides = split_overrides(from_env("TRAINPOINT_SET"));
  if (parsed.count("set")) {
    for (const auto& item : parsed["set"].as<std::vector<std::string>>()) options.overrides.push_back(item);
  }
  const std::string nproc = option(parsed, "nproc-per-node", "TRAINPOINT_NPROC_PER_NODE");
  if (!nproc.empty()) {
    char* end = nullptr;
    const long count = std::strtol(nproc.c_str(), &end, 10);
    if (nproc != "auto" && (end == nproc.c_str() || *end != '\0' || count < 1)) {
      fail(ExitCode::usage, "--nproc-per-node: '{}' is not a number of processes or auto", nproc);
    }
    options.overrides.push_back("dist.nproc_per_node=" + (nproc == "auto" ? "\"auto\"" : nproc));
  }
  // A local repository by its absolute path (in logs, run.json and report.html), not as typed ("." or "..").
  if (!options.repo.empty() && options.repo.find("://") == std::string::npos &&
      git::parse_remote_url(options.repo).transport == git::Transport::local) {
    options.repo = absolute(options.repo);
  }
  options.workdir = option(parsed, "workdir", "TRAINPOINT_WORKDIR");
  const bool trains = options.command == Command::run || options.command == Command::preflight ||
                      options.command == Command::check;
  // Absolute and normalised, so that logs name one path (not .../moons/../moons-run/...).
  // check writes nothing there unless it clones.
  const bool writes = options.command != Command::check || !options.repo.empty();
  options.workdir = options.workdir.empty() ? (trains ? default_workdir(writes) : fs::current_path().string())
                                            : absolute(options.workdir);
}

// The clone's settings, and --no-preflight.
void read_git_options(const cxxopts::ParseResult& parsed, Options& options) {
  git::CheckoutRequest& git = options.git;
  git.expect_sha = option(parsed, "expect-sha", "TRAINPOINT_EXPECT_SHA");
  git.cache_dir = option(parsed, "git-cache", "TRAINPOINT_GIT_CACHE");
  git.token_file = option(parsed, "git-token-file", "TRAINPOINT_GIT_TOKEN_FILE");
  git.username = option(parsed, "git-user", "TRAINPOINT_GIT_USER");
  git.ca_bundle = option(parsed, "ca-bundle", "TRAINPOINT_CA_BUNDLE");
  git.ssh_key = option(parsed, "ssh-key", "TRAINPOINT_SSH_KEY");
  git.known_hosts = option(parsed, "known-hosts", "TRAINPOINT_KNOWN_HOSTS");
  git.accept_unknown_host = flag(parsed, "accept-unknown-host", "TRAINPOINT_ACCEPT_UNKNOWN_HOST");
  git.submodules = !flag(parsed, "no-submodules", "TRAINPOINT_NO_SUBMODULES");
  git.lfs = !flag(parsed, "no-lfs", "TRAINPOINT_NO_LFS");
  options.preflight = !flag(parsed, "no-preflight", "TRAINPOINT_NO_PREFLIGHT");
  if (const std::string timeout = option(parsed, "git-timeout", "TRAINPOINT_GIT_TIMEOUT"); !timeout.empty()) {
    char* end = nullptr;
    const long seconds = std::strtol(timeout.c_str(), &end, 10);
    if (end == timeout.c_str() || *end != '\0' || seconds < 1) {
      fail(ExitCode::usage, "--git-timeout: '{}' is not a number of seconds", timeout);
    }
    git.network_timeout = std::chrono::seconds(seconds);
  }
}

void read_logging_options(const cxxopts::ParseResult& parsed, Options& options) {
  const std::string format = option(parsed, "log-format", "TRAINPOINT_LOG_FORMAT");
  if (format == "json") {
    options.log_format = log::Format::json;
  } else if (!format.empty() && format != "text") {
    fail(ExitCode::usage, "--log-format: '{}' is not text or json", format);
  }
  const std::string level = option(parsed, "log-level", "TRAINPOINT_LOG_LEVEL");
  if (!level.empty()) {
    if (spdlog::level::from_str(level) == spdlog::level::off && level != "off") {
      fail(ExitCode::usage, "--log-level: '{}' is not trace, debug, info, warn or error", level);
    }
    options.log_level = level;
  }
}

// render-job --predict's options, split at blanks and checked as `trainpoint predict` would check them, so that
// a job that would fail at once is not rendered.
std::vector<std::string> predict_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  std::vector<std::string> line{"predict"};
  line.insert(line.end(), words.begin(), words.end());
  Options checked;
  try {
    checked = parse(line);
  } catch (const Error& error) {
    fail(ExitCode::usage, "render-job --predict: {}", error.what());
  }
  if (checked.command != Command::predict) {
    fail(ExitCode::usage, "render-job --predict: give at least --model, --data and --out (see trainpoint predict --help)");
  }
  return words;
}

// render-job's flags, which become TOML assignments of k8s.*: numbers as they are, everything else as a
// quoted string; and where its spec and manifest are.
void read_render_job_options(const cxxopts::ParseResult& parsed, Options& options) {
  const std::vector<std::pair<const char*, const char*>> k8s_flags{
      {"kind", "kind"}, {"name", "name"}, {"namespace", "namespace"}, {"image", "image"}, {"workers", "workers"},
      {"gpus", "gpus_per_worker"}, {"cpu", "cpu"}, {"memory", "memory"}, {"shm-size", "shm_size"},
      {"scratch", "scratch"}, {"secret", "secret"}, {"vault-role", "vault_role"}, {"vault-tenant", "vault_tenant"},
      {"vault-path", "vault_path"}};
  for (const auto& [name, key] : k8s_flags) {
    if (!parsed.count(name)) continue;
    const std::string value = parsed[name].as<std::string>();
    const bool number = std::string(name) == "workers" || std::string(name) == "gpus";
    if (!number && value.find_first_of("\"\\\n") != std::string::npos) {
      fail(ExitCode::usage, "--{}: '{}' holds a quote, backslash or newline", name, value);
    }
    options.k8s_overrides.push_back(std::string("k8s.") + key + "=" + (number ? value : "\"" + value + "\""));
  }
  options.checkout = parsed.count("checkout") ? parsed["checkout"].as<std::string>() : ".";
  if (parsed.count("output")) options.manifest_file = parsed["output"].as<std::string>();
  if (parsed.count("predict")) options.predict_words = predict_words(parsed["predict"].as<std::string>());
}

ClusterOptions cluster_options(const cxxopts::ParseResult& parsed) {
  ClusterOptions cluster;
  const auto word = [&](const char* name) {
    return parsed.count(name) ? parsed[name].as<std::string>() : std::string();
  };
  cluster.kubeconfig = word("kubeconfig");
  cluster.context = word("context");
  if (parsed.count("job")) cluster.job = word("job");
  if (parsed.count("rank")) cluster.rank = parsed["rank"].as<int>();
  if (cluster.rank < 0) fail(ExitCode::usage, "--rank {}: a node rank is 0 or more", cluster.rank);
  cluster.follow = parsed.count("follow") > 0;
  cluster.previous = parsed.count("previous") > 0;
  if (parsed.count("dry-run")) {
    if (word("dry-run") != "server") fail(ExitCode::usage, "--dry-run={}: only --dry-run=server is there", word("dry-run"));
    cluster.dry_run = true;
  }
  return cluster;
}

// Whether `command`'s words lack what it cannot run without: then its help goes to stderr with exit 2, as a
// bare `trainpoint`'s does.
bool lacks_required_words(Command command, const cxxopts::ParseResult& parsed) {
  switch (command) {
    case Command::pack: return !(parsed.count("source") && parsed.count("destination"));
    case Command::s3: return !parsed.count("verb");
    case Command::make_dataset: return !(parsed.count("kind") && parsed.count("out"));
    case Command::predict: return !(parsed.count("model") && parsed.count("data") && parsed.count("out"));
    case Command::export_model: return !(parsed.count("model") && parsed.count("onnx"));
    case Command::cancel: return !parsed.count("job");
    default: return false;
  }
}

void check_required(const Options& options, const std::string& name) {
  const bool needs_spec = options.command == Command::run || options.command == Command::preflight ||
                          options.command == Command::check || options.command == Command::render_job ||
                          options.command == Command::submit;
  if (needs_spec && options.spec.empty()) {
    fail(ExitCode::usage, "--spec is required: the spec's path in the repository (or a local file without --repo) "
         "(see trainpoint {} --help)", name);
  }
  if (!options.ref.empty() && options.repo.empty()) {
    fail(ExitCode::usage, "--ref {} needs --repo: the repository to check it out from (see trainpoint {} --help)",
         options.ref, name);
  }
}

}  // namespace

Options parse(int argc, char** argv) {
  Options options;
  options.help_text = kOverview + std::string(kEnvironmentAndExits);
  if (argc < 2) {
    options.usage_error = true;  // as torchrun and the aws CLI: the overview, on stderr, exit 2
    return options;
  }
  const std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") return options;
  if (name == "--version" || name == "-V") {
    options.command = Command::version;
    return options;
  }
  options.arguments.assign(argv + 1, argv + argc);
  const CommandText* text = command_text(name);
  if (text == nullptr) unknown_command(name);
  options.command = text->command;

  std::vector<std::string> groups;
  cxxopts::Options parser = command_parser(text->command, groups);
  const cxxopts::ParseResult parsed = parse_words(parser, argc, argv, name);
  // `trainpoint s3 help` as `trainpoint s3 --help`
  const bool asks_help =
      parsed.count("help") || (parsed.count("verb") && parsed["verb"].as<std::string>() == "help");
  if (asks_help || lacks_required_words(text->command, parsed)) {
    options.help_text = command_help(*text, parser, groups);
    options.command = Command::help;
    options.usage_error = !asks_help;
    return options;
  }
  switch (text->command) {
    case Command::pack: options.pack = pack_request(parsed); return options;
    case Command::s3: options.s3_command = s3_command(parsed); return options;
    case Command::make_dataset: options.make_dataset = make_dataset_request(parsed); return options;
    case Command::predict:
      options.predict = predict_request(parsed);
      read_logging_options(parsed, options);
      return options;
    case Command::export_model:
      options.export_model = export_options(parsed);
      read_logging_options(parsed, options);
      return options;
    case Command::list_jobs:
    case Command::status:
    case Command::logs:
    case Command::cancel:
      options.cluster = cluster_options(parsed);
      if (parsed.count("namespace")) options.cluster.name_space = parsed["namespace"].as<std::string>();
      read_logging_options(parsed, options);
      return options;
    default: break;
  }
  read_spec_options(parsed, options);
  read_git_options(parsed, options);
  read_logging_options(parsed, options);
  read_render_job_options(parsed, options);
  if (options.command == Command::submit) options.cluster = cluster_options(parsed);
  check_required(options, name);
  return options;
}

Options parse(const std::vector<std::string>& words) {
  std::vector<std::string> line{"trainpoint"};
  line.insert(line.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (std::string& word : line) argv.push_back(word.data());
  return parse(static_cast<int>(argv.size()), argv.data());
}

int print_help(const Options& options) {
  (options.usage_error ? std::cerr : std::cout) << options.help_text;
  return options.usage_error ? static_cast<int>(ExitCode::usage) : 0;
}

}  // namespace tp::cli
