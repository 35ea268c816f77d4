// The training spec: a TOML file parsed once into typed structs and validated at load time.
// Every setting is declared once (settings.cpp) with its default, bounds and documentation;
// docs/spec.md is generated from the same declarations.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tp::spec {

// The settings that choose between behaviours are enums, parsed once here. Consumers `switch` over them, and
// -Werror=switch makes a new choice fail to compile until every consumer handles it. choice_names(E{})
// spells each choice as the spec writes it, in the enum's order; the settings table takes its choices from
// there.
enum class Staging { all, shard, stream };
enum class DataFormat { image_folder, image_csv, table_csv, shards };
enum class Task { classification, regression, multi_label };
enum class Optimizer { sgd, adam, adamw };
enum class Schedule { constant, one_cycle, cosine, step };
enum class Precision { fp32, bf16, fp16 };
enum class Backend { automatic, gloo, nccl };  // "auto": nccl when the rank sees a GPU, gloo otherwise
enum class LrScaling { none, linear };
enum class Resume { automatic, never };  // "auto": from the newest checkpoint of this run
enum class MetricMode { automatic, min, max };  // "auto": min for losses and errors, max for the others

template <std::size_t N>
using ChoiceNames = std::array<std::string_view, N>;
constexpr ChoiceNames<3> choice_names(Staging) { return {"all", "shard", "stream"}; }
constexpr ChoiceNames<4> choice_names(DataFormat) { return {"image_folder", "image_csv", "table_csv", "shards"}; }
constexpr ChoiceNames<3> choice_names(Task) { return {"classification", "regression", "multi_label"}; }
constexpr ChoiceNames<3> choice_names(Optimizer) { return {"sgd", "adam", "adamw"}; }
constexpr ChoiceNames<4> choice_names(Schedule) { return {"constant", "one_cycle", "cosine", "step"}; }
constexpr ChoiceNames<3> choice_names(Precision) { return {"fp32", "bf16", "fp16"}; }
constexpr ChoiceNames<3> choice_names(Backend) { return {"auto", "gloo", "nccl"}; }
constexpr ChoiceNames<2> choice_names(LrScaling) { return {"none", "linear"}; }
constexpr ChoiceNames<2> choice_names(Resume) { return {"auto", "never"}; }
constexpr ChoiceNames<3> choice_names(MetricMode) { return {"auto", "min", "max"}; }

// How the spec writes `choice`, for messages: name(Optimizer::sgd) is "sgd".
template <typename Choice>
std::string_view name(Choice choice) {
  return choice_names(choice).at(static_cast<std::size_t>(choice));
}

// The choice the spec writes as `text` (parse_choice<Task>("regression")); none for a word that is not one.
template <typename Choice>
std::optional<Choice> parse_choice(std::string_view text) {
  constexpr auto names = choice_names(Choice{});
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<Choice>(i);
  }
  return std::nullopt;
}

// After a switch that returns for every choice: only a value outside the enum (a bad cast) gets here.
template <typename Choice>
[[noreturn]] void unhandled(Choice choice) {
  throw std::logic_error("unhandled choice " + std::to_string(static_cast<int>(choice)));
}

// Whether data.format reads image files, each decoded on its own (and so streamable from S3 object by object),
// rather than one table.
inline bool reads_images(DataFormat format) {
  switch (format) {
    case DataFormat::image_folder:
    case DataFormat::image_csv:
    case DataFormat::shards: return true;
    case DataFormat::table_csv: return false;
  }
  unhandled(format);
}

struct JobSpec {
  std::string name;
  std::int64_t seed;
  std::string output;
  std::vector<std::string> command;  // command mode: the user's program, run once per local rank
  std::int64_t metrics_port;         // Prometheus /metrics on local rank 0 of each node; 0: off
  std::string requirements;          // command mode: a pip requirements file in the repository
  std::map<std::string, std::string> env;  // command mode: environment variables for the program and pip
};

struct DataSpec {
  std::string source;        // a local path or s3://bucket/prefix
  Staging staging;           // s3 sources
  std::int64_t stream_cache_mb;  // stream, shards: disk for streamed objects, per rank
  std::int64_t shuffle_buffer;   // shards: the span of samples each epoch's order shuffles within
  std::string endpoint;      // s3 sources: the endpoint URL (empty: from the environment)
  std::string credentials;   // s3 sources: a credentials file (empty: the credential chain)
  DataFormat format;
  double valid;              // held-out fraction of `source` when valid_source is empty
  std::string valid_source;  // separate validation data
  std::int64_t image_size;
  std::int64_t channels;
  std::string target;        // table_csv, image_csv: the target column
  Task task;
  std::int64_t workers;
  std::vector<std::string> augment;      // training-only image transforms: random_resized_crop, flip
  std::string resize;                    // stretch | crop
  std::string normalize;                 // imagenet | none
  std::vector<std::string> categorical;  // table_csv: columns one-hot encoded
  std::int64_t max_bad_files;            // corrupted images skipped before the job fails
  bool drop_last;                        // drop the samples that do not fill every rank equally
};

struct ModelSpec {
  std::string arch;         // built-in architecture, or empty when `torchscript` is set
  std::string torchscript;  // path in the repository of a TorchScript module
  std::vector<std::int64_t> hidden;
  std::string weights;  // path in the repository of initial weights (TorchScript, state dict or checkpoint)
};

// [train.early_stop]: the run stops when `monitor` has not improved by `min_delta` for `patience` epochs.
struct EarlyStopSpec {
  std::int64_t patience;  // 0: off
  std::string monitor;    // a metric of the epoch's line, such as valid_loss or accuracy
  MetricMode mode;
  double min_delta;
};

// [train.reduce_lr_on_plateau]: the lr is multiplied by `factor` whenever `monitor` has not improved by
// `min_delta` for `patience` epochs, down to `min_lr`.
struct LrPlateauSpec {
  std::int64_t patience;  // 0: off
  std::string monitor;
  MetricMode mode;
  double min_delta;
  double factor;
  double min_lr;
};

struct TrainSpec {
  std::int64_t epochs;
  std::int64_t batch_size;  // per rank
  Optimizer optimizer;
  double lr;
  double momentum;
  bool nesterov;  // sgd
  double weight_decay;
  Schedule schedule;
  double warmup;            // fraction of the steps spent warming up (one_cycle's pct_start)
  std::int64_t step_every;  // step: epochs between two decays
  double step_gamma;        // step: the factor of each decay
  LrScaling lr_scaling;
  std::int64_t accumulate;
  double clip_norm;  // 0: off
  double label_smoothing;
  std::int64_t top_k;  // classification: also report top-k accuracy when there are more than k classes
  std::int64_t freeze_epochs;  // fine-tuning: the first epochs train only the head
  double body_lr_factor;       // fine-tuning: the body's lr relative to the head's
  Precision precision;
  std::string channels_last;   // auto | true | false: NHWC memory format for images and conv weights
  bool lr_find;                // run the learning-rate range test instead of training
  EarlyStopSpec early_stop;
  LrPlateauSpec reduce_lr_on_plateau;
};

struct DistSpec {
  Backend backend;
  std::int64_t nproc_per_node;  // 0 means "auto"
  std::int64_t timeout_s;
  std::int64_t heartbeat_s;  // how often each rank publishes its step and phase
  std::int64_t stall_s;      // a rank that has not advanced for this long is reported
  std::int64_t bucket_mb;
  bool allow_unused_parameters;
};

struct CheckpointSpec {
  std::int64_t every_epochs;   // 0 disables epoch checkpoints
  std::int64_t every_steps;    // mid-epoch checkpoints every N optimizer steps; 0: off
  std::int64_t every_minutes;  // mid-epoch checkpoints every N minutes; 0: off
  std::int64_t keep;
  std::string keep_best;  // a metric: the best epoch's model is kept and is model.pt; empty: the last epoch's
  Resume resume;
};

// Where the run's records go besides metrics.jsonl and steps.jsonl (runtime/telemetry's sinks).
struct LogSpec {
  bool tensorboard;  // TensorBoard event files in <job.output>/tensorboard/
  std::string mlflow_uri;  // an MLflow tracking server (empty: MLFLOW_TRACKING_URI, else none)
};

// Who hears of the job's end and its stalls (runtime/telemetry/notify.h).
struct NotifySpec {
  std::vector<std::string> webhooks;  // http(s) URLs, or "env:NAME": the URL in the variable NAME (a Secret's)
  std::string format;                 // auto | json | slack | teams
  std::vector<std::string> on;        // of finished, failed, stalled
};

// What report.html and interpretation.json show of the trained model.
struct ReportSpec {
  std::int64_t top_losses;  // the validation samples with the highest loss listed (classification)
};

// Kubernetes settings of `trainpoint render-job` (runtime/k8s); `run` ignores them.
struct K8sSpec {
  std::string kind;  // pytorchjob | trainjob
  std::string name;  // empty: job.name
  std::string name_space;
  std::string image;
  std::int64_t workers;
  std::int64_t gpus_per_worker;
  std::string cpu;
  std::string memory;
  std::string shm_size;
  std::string scratch;
  std::int64_t backoff_limit;
  std::int64_t grace_s;  // terminationGracePeriodSeconds: how long a stopped pod has to save a checkpoint
  std::string secret;
  std::string vault_role;
  std::string vault_tenant;
  std::string vault_path;
  std::int64_t metrics_port;  // the pods' job.metrics_port, announced for Prometheus; 0: none
  // Placement, as the platform requires it (often from the platform defaults file).
  std::map<std::string, std::string> node_selector;  // node label key -> value
  std::vector<std::string> tolerations;               // kubectl taint's words: KEY[=VALUE][:EFFECT]
  std::string queue;                                  // Kueue LocalQueue: labelled and created suspended
  std::string priority_class;
  std::int64_t active_deadline_s;  // 0: none
  std::int64_t ttl_s;              // ttlSecondsAfterFinished; 0: none
  std::string service_account;
  std::string image_pull_secret;
  std::map<std::string, std::string> volumes;  // PersistentVolumeClaim name -> mount path
};

struct Spec {
  JobSpec job;
  DataSpec data;
  ModelSpec model;
  TrainSpec train;
  DistSpec dist;
  CheckpointSpec checkpoint;
  LogSpec log;
  ReportSpec report;
  NotifySpec notify;
  K8sSpec k8s;
};

// Where a resolved value came from: "default", "FILE:LINE:COL" or "--set".
using Origins = std::map<std::string, std::string>;

struct LoadedSpec {
  Spec spec;
  Origins origins;
  std::string source_name;  // how the file is named in messages
};

// The platform team's defaults for Kubernetes jobs (image, secret or Vault, queue, tolerations), a TOML
// document of [k8s] settings alone; render-job and submit read it (docs/guide.md, "The Kubernetes job").
struct PlatformDefaults {
  std::string document;
  std::string source_name;  // its path, for messages and origins
};

// Built-in defaults < the platform defaults, when given < the TOML document < overrides ("key=value", from --set).
// `source_name` is how the file is named in errors (for example its path inside the repository).
// Throws tp::Error (ExitCode::spec) with "FILE:LINE:COL: key: what is wrong".
LoadedSpec load_file(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                     const std::string& source_name, const std::optional<PlatformDefaults>& platform = std::nullopt);
LoadedSpec load_string(std::string_view document, const std::vector<std::string>& overrides,
                       const std::string& source_name,
                       const std::optional<PlatformDefaults>& platform = std::nullopt);

// Every setting at its built-in default (a required one empty): what holds before a spec has loaded.
Spec defaults();

// The resolved spec as TOML, each value followed by a comment naming its origin.
std::string describe(const LoadedSpec& loaded);
// A setting that changes what a run computes (declared `changes_run`): a restart resumes only checkpoints
// written with the same values, and a comparison of runs (TensorBoard's HParams, MLflow's params) shows them.
struct RunSetting {
  std::string key;
  std::string toml;  // as TOML writes it
  // The value itself; a choice as its name, a list or table as its TOML text.
  std::variant<bool, std::int64_t, double, std::string> value;
};
// Every run setting of `spec`, in declaration order.
std::vector<RunSetting> run_settings(const Spec& spec);

// Markdown reference of every setting (docs/spec.md).
std::string markdown_reference();

}  // namespace tp::spec
