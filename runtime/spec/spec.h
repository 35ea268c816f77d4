// The training spec: a TOML file parsed once into typed structs and validated at load time.
// Every setting is declared once (settings.cpp) with its default, bounds and documentation;
// docs/spec.md is generated from the same declarations.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace tp::spec {

struct JobSpec {
  std::string name;
  std::int64_t seed;
  std::string output;
  std::vector<std::string> command;  // command mode: the user's program, run once per local rank
};

struct DataSpec {
  std::string source;        // a local path or s3://bucket/prefix
  std::string staging;       // s3 sources: all | shard | stream
  std::int64_t stream_cache_mb;  // stream: disk for streamed objects, per rank
  std::string endpoint;      // s3 sources: the endpoint URL (empty: from the environment)
  std::string credentials;   // s3 sources: a credentials file (empty: the credential chain)
  std::string format;        // image_folder | image_csv | table_csv
  double valid;              // held-out fraction of `source` when valid_source is empty
  std::string valid_source;  // separate validation data
  std::int64_t image_size;
  std::int64_t channels;
  std::string target;        // table_csv, image_csv: the target column
  std::string task;          // classification | regression | multi_label
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

struct TrainSpec {
  std::int64_t epochs;
  std::int64_t batch_size;  // per rank
  std::string optimizer;    // sgd | adam | adamw
  double lr;
  double momentum;
  bool nesterov;  // sgd
  double weight_decay;
  std::string schedule;     // constant | one_cycle | cosine | step
  double warmup;            // fraction of the steps spent warming up (one_cycle's pct_start)
  std::int64_t step_every;  // step: epochs between two decays
  double step_gamma;        // step: the factor of each decay
  std::string lr_scaling;  // none | linear
  std::int64_t accumulate;
  double clip_norm;  // 0: off
  double label_smoothing;
  std::int64_t top_k;  // classification: also report top-k accuracy when there are more than k classes
  std::int64_t freeze_epochs;  // fine-tuning: the first epochs train only the head
  double body_lr_factor;       // fine-tuning: the body's lr relative to the head's
  std::string precision;       // fp32 | bf16 | fp16
  std::string channels_last;   // auto | true | false: NHWC memory format for images and conv weights
  bool lr_find;                // run the learning-rate range test instead of training
};

struct DistSpec {
  std::string backend;          // auto | gloo | nccl
  std::int64_t nproc_per_node;  // 0 means "auto"
  std::int64_t timeout_s;
  std::int64_t heartbeat_s;  // how often each rank publishes its step and phase
  std::int64_t stall_s;      // a rank that has not advanced for this long is reported
  std::int64_t bucket_mb;
  bool allow_unused_parameters;
};

struct CheckpointSpec {
  std::int64_t every_epochs;  // 0 disables epoch checkpoints
  std::int64_t keep;
  std::string resume;  // auto | never
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
  std::string secret;
  std::string vault_role;
  std::string vault_tenant;
  std::string vault_path;
};

struct Spec {
  JobSpec job;
  DataSpec data;
  ModelSpec model;
  TrainSpec train;
  DistSpec dist;
  CheckpointSpec checkpoint;
  K8sSpec k8s;
};

// Where a resolved value came from: "default", "FILE:LINE:COL" or "--set".
using Origins = std::map<std::string, std::string>;

struct LoadedSpec {
  Spec spec;
  Origins origins;
  std::string source_name;  // how the file is named in messages
};

// Built-in defaults < the TOML document < overrides ("key=value", from --set).
// `source_name` is how the file is named in errors (for example its path inside the repository).
// Throws tp::Error (ExitCode::spec) with "FILE:LINE:COL: key: what is wrong".
LoadedSpec load_file(const std::filesystem::path& file, const std::vector<std::string>& overrides,
                     const std::string& source_name);
LoadedSpec load_string(std::string_view document, const std::vector<std::string>& overrides,
                       const std::string& source_name);

// The resolved spec as TOML, each value followed by a comment naming its origin.
std::string describe(const LoadedSpec& loaded);
// Markdown reference of every setting (docs/spec.md).
std::string markdown_reference();

}  // namespace tp::spec
