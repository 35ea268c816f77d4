// Command-line and environment parsing. Every option can also come from TRAINPOINT_<OPTION>
// (job manifests usually set environment variables); the command line wins.
#pragma once

#include <string>
#include <vector>

#include "common/log.h"
#include "data/make_dataset.h"
#include "git/checkout.h"
#include "s3/command.h"
#include "storage/pack.h"
#include "storage/predictions.h"

namespace tp::cli {

enum class Command {
  run, preflight, check, version, spec_reference, s3, make_dataset, pack, predict, export_model, render_job,
  submit, list_jobs, status, logs, cancel, help
};

// submit, list, status, logs, cancel: which cluster (k8s/connection.h finds it as kubectl does) and which job.
struct ClusterOptions {
  std::string kubeconfig;  // --kubeconfig; empty: $KUBECONFIG, ~/.kube/config, the pod's service account
  std::string context;     // --context; empty: the kubeconfig's current one
  std::string name_space;  // --namespace; empty: the context's (submit: k8s.namespace first)
  std::string job;         // JOB of status, logs and cancel; empty: the newest trainpoint job (status, logs)
  int rank = 0;            // logs --rank: the node rank whose pod's log is shown
  bool follow = false;     // logs --follow
  bool previous = false;   // logs --previous: the run before the container's last restart
  bool dry_run = false;    // submit --dry-run=server: validated by the server, not created
};

// `trainpoint export`: a model.pt (local or s3://) as an ONNX file, through a Python's torch.onnx.
struct ExportOptions {
  std::string model;
  std::string onnx;                 // the .onnx file to write
  std::string python = "python3";  // the Python with torch and onnx
  int opset = 17;
  s3::ConnectionOptions connection;  // for an s3:// model
  std::string workdir;               // where an s3:// model is downloaded
};

struct Options {
  Command command = Command::help;
  std::string repo;   // URL or local path of the git repository; empty: --spec is a local file
  std::string ref;    // commit SHA, branch or tag
  std::string spec;   // path of the spec inside the repository, or on local disk
  std::vector<std::string> overrides;  // --set key=value
  std::string workdir;  // absolute
  bool preflight = true;  // run: check the ref, spec, data, output, GPUs, master and disk first (docs/reliability.md)
  // Clone settings (auth, cache, checks); url, ref and workdir are filled in from the fields above.
  git::CheckoutRequest git;
  log::Format log_format = log::Format::text;
  std::string log_level = "info";
  std::string help_text;     // Command::help: what to print
  bool usage_error = false;  // Command::help: print it on stderr and exit 2 (a bare `trainpoint`)
  std::vector<std::string> arguments;  // argv without the program name, to start workers with
  // render-job: `k8s.*` spec overrides from its flags (they win over --set), the directory the spec
  // is read from (a local working tree of --repo), and where the manifest goes (empty: stdout).
  std::vector<std::string> k8s_overrides;
  std::string checkout;
  std::string manifest_file;
  // render-job --predict: the words of `trainpoint predict` the job's pods run instead of `run` (checked here).
  std::vector<std::string> predict_words;
  // pack: what is packed and where; an empty workdir is a temporary folder of the command's own.
  storage::PackRequest pack;
  s3::S3Command s3_command;                // s3 ls|cp|sync
  data::MakeDatasetRequest make_dataset;  // make-dataset images|table
  storage::PredictRequest predict;        // predict --model M --data D --out F
  ExportOptions export_model;             // export --model M --onnx F
  ClusterOptions cluster;                 // submit, list, status, logs, cancel
};

// Throws tp::Error (ExitCode::usage) with a message naming the bad option.
Options parse(int argc, char** argv);
// The same for `words`, the words after the program name (tools that stand in for one command, tests).
Options parse(const std::vector<std::string>& words);

// Command::help: prints options.help_text (on stderr for a usage error); returns the exit code.
int print_help(const Options& options);

}  // namespace tp::cli
