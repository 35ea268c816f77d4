#include "spec/settings.h"

#include <fmt/format.h>

#include "common/error.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <regex>
#include <type_traits>
#include <utility>

namespace tp::spec {
namespace {

// Fluent declaration of one setting bound to a member of a Spec section.
class Declare {
 public:
  template <typename Section, typename T>
  Declare(const char* key, Section Spec::*section, T Section::*member)
      : Declare(key, std::in_place_type<T>, [section, member](auto& spec) -> auto& { return spec.*section.*member; }) {}
  // A setting of a table inside a section ([train.early_stop]).
  template <typename Section, typename Group, typename T>
  Declare(const char* key, Section Spec::*section, Group Section::*group, T Group::*member)
      : Declare(key, std::in_place_type<T>,
                [section, group, member](auto& spec) -> auto& { return spec.*section.*group.*member; }) {}
  template <typename T>
  Declare& fallback(T value) {
    if constexpr (std::is_same_v<T, const char*>) {
      setting_.default_value = Value(std::string(value));
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      setting_.default_value = Value(static_cast<std::int64_t>(value));
    } else {
      setting_.default_value = Value(value);
    }
    return *this;
  }
  Declare& optional() {
    setting_.optional = true;
    return *this;
  }
  Declare& range(double min, double max) {
    setting_.min = min;
    setting_.max = max;
    return *this;
  }
  Declare& above(double min, double max) {
    range(min, max);
    setting_.min_exclusive = true;
    return *this;
  }
  Declare& choices(std::vector<std::string> choices) {
    if (setting_.kind != Kind::string_list) setting_.kind = Kind::choice;  // a list checks each element
    setting_.choices = std::move(choices);
    return *this;
  }
  Declare& changes_run() {
    setting_.changes_run = true;
    return *this;
  }
  Declare& allow_auto() {
    setting_.allow_auto = true;
    return *this;
  }
  // A table's entry names are checked by `check`.
  template <typename Check>
  Declare& entries(Check check) {
    setting_.check_entry = check;
    return *this;
  }
  Declare& doc(const char* text) {
    setting_.doc = text;
    return *this;
  }
  operator Setting() const { return setting_; }

 private:
  // `field(spec)` is the member the setting is stored in, for a Spec and a const Spec.
  template <typename T, typename Field>
  Declare(const char* key, std::in_place_type_t<T>, Field field) {
    setting_.key = key;
    if constexpr (std::is_enum_v<T>) {
      // Stored as the enum, read and written as its name; the loader checks the name against `choices` first.
      static constexpr auto names = choice_names(T{});
      setting_.kind = Kind::choice;
      setting_.choices.assign(names.begin(), names.end());
      setting_.assign = [field](Spec& spec, const Value& value) {
        field(spec) = *parse_choice<T>(std::get<std::string>(value));
      };
      setting_.read = [field](const Spec& spec) -> Value { return std::string(name(field(spec))); };
    } else {
      setting_.kind = kind_of<T>();
      setting_.assign = [field](Spec& spec, const Value& value) { field(spec) = std::get<T>(value); };
      setting_.read = [field](const Spec& spec) -> Value { return field(spec); };
    }
  }
  template <typename T>
  static Kind kind_of() {
    if constexpr (std::is_same_v<T, bool>) return Kind::boolean;
    if constexpr (std::is_same_v<T, std::int64_t>) return Kind::integer;
    if constexpr (std::is_same_v<T, double>) return Kind::number;
    if constexpr (std::is_same_v<T, std::string>) return Kind::string;
    if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return Kind::integer_list;
    if constexpr (std::is_same_v<T, std::vector<std::string>>) return Kind::string_list;
    if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) return Kind::string_table;
  }
  Setting setting_;
};

// What trainpoint itself gives a command-mode program: job.env cannot change it.
bool set_by_trainpoint(const std::string& name) {
  static const char* const kNames[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                       "MASTER_PORT", "VIRTUAL_ENV"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames) || name.rfind("TRAINPOINT_", 0) == 0;
}

void check_environment_name(const std::string& key, const std::string& name, const std::string& at) {
  const bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                     });
  if (!valid) {
    fail(ExitCode::spec, "{}: {}: '{}' is not an environment variable name (letters, digits and '_', not starting "
         "with a digit)", at, key, name);
  }
  if (set_by_trainpoint(name)) {
    fail(ExitCode::spec, "{}: {}: {} is set by trainpoint for the program (docs/spec.md, job.command) and cannot be "
         "changed here", at, key, name);
  }
}

// A Kubernetes label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters.
void check_label_key(const std::string& key, const std::string& name, const std::string& at) {
  static const std::regex label_key(
      R"(^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$)");
  if (!std::regex_match(name, label_key)) {
    fail(ExitCode::spec, "{}: {}: '{}' is not a Kubernetes label key (such as \"nvidia.com/gpu.product\")", at, key,
         name);
  }
}

// A PersistentVolumeClaim's name: a DNS subdomain.
void check_claim_name(const std::string& key, const std::string& name, const std::string& at) {
  static const std::regex subdomain(R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
  if (name.size() > 253 || !std::regex_match(name, subdomain)) {
    fail(ExitCode::spec, "{}: {}: '{}' is not a PersistentVolumeClaim name (lowercase letters, digits, '-' and '.')",
         at, key, name);
  }
}

// The per-epoch metrics a run reports (metrics.jsonl's names), which early stopping and keep_best may watch.
std::vector<std::string> metric_names() {
  return {"valid_loss", "accuracy", "error_rate", "top_k_accuracy", "f1", "f1:<class>", "mae", "mse", "train_loss"};
}
std::vector<std::string> with_none(std::vector<std::string> names) {
  names.insert(names.begin(), "none");
  return names;
}

std::vector<Setting> job_settings() {
  return {
      Declare("job.name", &Spec::job, &JobSpec::name).fallback("trainpoint").doc("Name of the run, used in logs and outputs."),
      Declare("job.seed", &Spec::job, &JobSpec::seed).changes_run().fallback(42).range(0, 4294967295.0)
          .doc("Seed for weight initialisation, shuffling and augmentation: the same seed and world size give the same run "
               "on the CPU. On GPUs they give the same initial weights and the same batches, but not bit-identical "
               "results: cuDNN chooses its convolution algorithms and some CUDA kernels add with atomics, in no fixed "
               "order."),
      Declare("job.output", &Spec::job, &JobSpec::output).fallback("output")
          .doc("Directory for checkpoints, metrics (metrics.jsonl, metrics.csv, steps.jsonl), report.html, the final "
               "model and the run record (docs/training.md). A relative path is taken from the working directory "
               "(--workdir). s3://bucket/prefix: written under the workdir and uploaded as each file is complete "
               "(checkpoints, metrics and report after each epoch, then model.pt and run.json), with `data.endpoint` "
               "and `data.credentials`; a restarted job fetches the newest checkpoints and the metrics from there to "
               "resume."),
      Declare("job.command", &Spec::job, &JobSpec::command).fallback(std::vector<std::string>{})
          .doc("Command mode: your own program and its arguments, for example [\"python3\", \"train.py\"], run from "
               "the repository root once per local rank with torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, "
               "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), TRAINPOINT_DATA_DIR (the local `data.source`, when set) "
               "and TRAINPOINT_OUTPUT_DIR (`job.output`). [data] and [model] become optional; [train] is ignored."),
      Declare("job.metrics_port", &Spec::job, &JobSpec::metrics_port).fallback(0).range(0, 65535)
          .doc("Serve Prometheus metrics at http://<node>:<port>/metrics from local rank 0 of each node, labelled "
               "with the job and rank: step, epoch, samples, loss, lr, the last step's time, data wait, exposed "
               "all-reduce and checkpoint seconds, stalled ranks, and GPU memory on CUDA (docs/training.md). "
               "0: off. render-job's manifests set it from `k8s.metrics_port`."),
      Declare("job.requirements", &Spec::job, &JobSpec::requirements).optional()
          .doc("Command mode: a pip requirements file in the repository, such as \"requirements.txt\". Before the "
               "program starts, its packages are installed into a virtual environment over the image's Python "
               "(which keeps the image's PyTorch), built once per node and reused while the file, the Python and "
               "the torch version stay the same; the program runs with that environment's `python3` first in PATH. "
               "pip reads PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_TRUSTED_HOST, PIP_CERT and pip.conf. A "
               "requirement that would replace the image's torch is refused (docs/guide.md)."),
      Declare("job.env", &Spec::job, &JobSpec::env).fallback(std::map<std::string, std::string>{})
          .entries(check_environment_name)
          .doc("Command mode: environment variables for the program (and for pip), such as "
               "{ NCCL_DEBUG = \"INFO\", OMP_NUM_THREADS = \"4\" }, or a [job.env] table; `--set job.env.NAME=value` "
               "sets one. The variables trainpoint gives the program (RANK, WORLD_SIZE, MASTER_ADDR, TRAINPOINT_*...) "
               "cannot be set here; a PATH here gets the requirements' environment put first."),
  };
}

std::vector<Setting> data_settings() {
  return {
      Declare("data.source", &Spec::data, &DataSpec::source).changes_run()
          .doc("Training data: a local directory or file (a relative path is taken from the repository root), or "
               "s3://bucket/prefix, staged before training (see `data.staging`). Required unless `job.command` is set."),
      Declare("data.staging", &Spec::data, &DataSpec::staging).changes_run().fallback("all")
          .doc("s3:// sources: all (every node stages every object before training; the ranks of a node share one "
               "transfer and cache), shard (each rank stages and trains on only its share, balanced by bytes; every "
               "rank takes as many steps as the smallest share allows) or stream (training starts at once: each "
               "rank fetches the images it is about to read, in its sampler's order, into a cache of "
               "`data.stream_cache_mb`; image formats only, table_csv is staged)."),
      Declare("data.stream_cache_mb", &Spec::data, &DataSpec::stream_cache_mb).fallback(4096).range(16, 1e9)
          .doc("data.staging = \"stream\" and data.format = \"shards\" from S3: disk the streamed objects may fill, "
               "the least recently read deleted to make room. Images: each rank's own cache; images being read are "
               "never deleted, so a batch's images must fit. Packed shards: one cache per node, shared by its ranks "
               "(each shard downloaded once per node, under <workdir>/cache/stream); a shard is deleted only when no "
               "rank of the node holds it (reads it, or fetched it ahead), so the shards the node's ranks read at "
               "once (the one or two a shuffle buffer spans, and a few ahead) must fit; a rank waiting for its shard "
               "may go one shard over."),
      Declare("data.shuffle_buffer", &Spec::data, &DataSpec::shuffle_buffer).changes_run().fallback(10000).range(1, 1e9)
          .doc("data.format = \"shards\": each epoch deals the shards, in a new order (from job.seed and the epoch), "
               "to the nodes (pods), each node's ranks reading only its shards, one after another, and shuffles the "
               "samples within consecutive blocks of this many; the one or two shards a block spans (more for a block "
               "larger than a shard) are on disk at once (docs/s3.md, \"Packed shards\")."),
      Declare("data.endpoint", &Spec::data, &DataSpec::endpoint).optional()
          .doc("s3:// sources: the S3 endpoint, such as http://minio.minio:9000. Unset: AWS_ENDPOINT_URL_S3, "
               "AWS_ENDPOINT_URL, S3_ENDPOINT_URL or MINIO_URL, else AWS (docs/s3.md)."),
      Declare("data.credentials", &Spec::data, &DataSpec::credentials).optional()
          .doc("s3:// sources: a credentials file (shell `export` lines or JSON, as the Vault agent writes). Unset: "
               "the chain in docs/s3.md (TRAINPOINT_S3_CREDENTIALS, the environment, /vault/secrets, ~/.aws, "
               "anonymous)."),
      Declare("data.format", &Spec::data, &DataSpec::format).changes_run().fallback("image_folder")
          .doc("image_folder: one subdirectory per class holding PNG or JPEG files; a source holding train/ and valid/ "
               "(or val/) folders, each with one subdirectory per class, is the training and validation split "
               "(fastai's layout). image_csv: a CSV file (or a "
               "directory holding one) whose first column is an image path (relative to the file) and whose `data.target` column is the label. "
               "table_csv: a CSV file (or a directory holding one) with a header, feature columns and a target column. "
               "shards: the index.json and tar shards `trainpoint pack` writes from an image_folder or image_csv "
               "source (docs/s3.md, \"Packed shards\"), read from S3 a shard at a time or from local disk."),
      Declare("data.valid", &Spec::data, &DataSpec::valid).changes_run().fallback(0.2).range(0.0, 0.9)
          .doc("Fraction of `data.source` held out for validation (chosen with `job.seed`). Ignored when "
               "`data.valid_source` is set, or when an image_folder source holds train/ and valid/ (or val/)."),
      Declare("data.valid_source", &Spec::data, &DataSpec::valid_source).changes_run().optional()
          .doc("Separate validation data in the same format as `data.source`. Conflicts with `data.valid`."),
      Declare("data.image_size", &Spec::data, &DataSpec::image_size).changes_run().fallback(32).range(4, 4096)
          .doc("Images are resized to image_size x image_size pixels."),
      Declare("data.channels", &Spec::data, &DataSpec::channels).changes_run().fallback(3).range(1, 3)
          .doc("Colour channels the model sees: 1 (grayscale) or 3 (RGB). Images are converted."),
      Declare("data.target", &Spec::data, &DataSpec::target).changes_run().fallback("label")
          .doc("table_csv and image_csv: the name of the target column. In table_csv every other column is a "
               "feature: numeric, or listed in `data.categorical`."),
      Declare("data.task", &Spec::data, &DataSpec::task).changes_run().fallback("classification")
          .doc("table_csv and image_csv: classification (the target is a class name), regression (a number) or "
               "multi_label (image_csv: space-separated class names)."),
      Declare("data.workers", &Spec::data, &DataSpec::workers).fallback(2).range(0, 256)
          .doc("Threads decoding and augmenting data; 0 decodes on the training thread."),
      Declare("data.augment", &Spec::data, &DataSpec::augment).changes_run().fallback(std::vector<std::string>{})
          .choices({"random_resized_crop", "flip"})
          .doc("Random image transforms for training, each deterministic in (job.seed, epoch, sample): "
               "random_resized_crop (scale 0.08-1, aspect ratio 3/4-4/3, as torchvision) and flip (horizontal, p=0.5). "
               "Validation images are only resized."),
      Declare("data.resize", &Spec::data, &DataSpec::resize).changes_run().fallback("stretch").choices({"stretch", "crop"})
          .doc("How images become image_size x image_size: stretch the whole image, or crop (shorter side to "
               "image_size, then the center square)."),
      Declare("data.normalize", &Spec::data, &DataSpec::normalize).changes_run().fallback("imagenet").choices({"imagenet", "none"})
          .doc("Pixel normalization: imagenet ((x - mean) / std with ImageNet statistics) or none (x in [0, 1])."),
      Declare("data.categorical", &Spec::data, &DataSpec::categorical).changes_run().fallback(std::vector<std::string>{})
          .doc("table_csv: feature columns holding categories, one-hot encoded (other features must be numeric; "
               "their missing cells, empty or NA, NaN, null, None, become the training split's median and set an "
               "extra input `column=#na#`)."),
      Declare("data.max_bad_files", &Spec::data, &DataSpec::max_bad_files).fallback(10).range(0, 1e12)
          .doc("Corrupted or unsupported images are skipped with a warning (another sample takes their place); the "
               "job fails when a rank finds more than this many."),
      Declare("data.drop_last", &Spec::data, &DataSpec::drop_last).changes_run().fallback(false)
          .doc("Drop the samples that would not give every rank an equal share (otherwise shares are padded by "
               "repeating samples)."),
  };
}

std::vector<Setting> model_settings() {
  return {
      Declare("model.arch", &Spec::model, &ModelSpec::arch).changes_run().optional()
          .choices({"mlp", "small_cnn", "resnet18", "resnet34", "resnet50", "tabular"})
          .doc("Built-in architecture. mlp: fully connected layers of `model.hidden` units on flattened inputs. "
               "small_cnn: two 3x3 convolutions with max pooling and two fully connected layers. "
               "resnet18, resnet34, resnet50: torchvision's, with its parameter names (its weights load with "
               "`model.weights`), the data's channels and classes. "
               "tabular: fastai's tabular model for table_csv: categorical columns through embeddings (linear "
               "layers on their one-hot columns), continuous ones through batch norm, then `model.hidden` layers "
               "(linear, ReLU, batch norm) and the output layer. "
               "Set either this or `model.torchscript`."),
      Declare("model.torchscript", &Spec::model, &ModelSpec::torchscript).changes_run().optional()
          .doc("Path in the repository of a TorchScript module (torch.jit.script(model).save(path)) to train "
               "instead of a built-in architecture."),
      Declare("model.hidden", &Spec::model, &ModelSpec::hidden).changes_run().fallback(std::vector<std::int64_t>{128}).range(1, 65536)
          .doc("mlp and tabular: the width of each hidden layer."),
      Declare("model.weights", &Spec::model, &ModelSpec::weights).changes_run().optional()
          .doc("Initial weights: a path in the repository, or s3://bucket/key (downloaded once per node into the "
               "workdir, with `data.endpoint` and `data.credentials`). A TorchScript module, a state dict saved by "
               "Python (torch.save(dict(model.state_dict()), path)) or a trainpoint checkpoint. Every parameter and "
               "buffer must be there with the model's shape, except the last layer (the head), which keeps its "
               "fresh initialisation when its shape differs (another number of classes)."),
  };
}

std::vector<Setting> train_settings() {
  return {
      Declare("train.epochs", &Spec::train, &TrainSpec::epochs).fallback(5).range(1, 100000).doc("Passes over the training data."),
      Declare("train.batch_size", &Spec::train, &TrainSpec::batch_size).changes_run().fallback(64).range(1, 65536)
          .doc("Samples per step on each rank; the global batch is batch_size x world size."),
      Declare("train.optimizer", &Spec::train, &TrainSpec::optimizer).changes_run().fallback("adamw")
          .doc("sgd (with `train.momentum`), adam or adamw (decoupled weight decay)."),
      Declare("train.lr", &Spec::train, &TrainSpec::lr).changes_run().fallback(1e-3).above(0.0, 10.0)
          .doc("Peak learning rate."),
      Declare("train.momentum", &Spec::train, &TrainSpec::momentum).changes_run().fallback(0.9).range(0.0, 0.999)
          .doc("sgd: momentum. adam/adamw: beta1."),
      Declare("train.nesterov", &Spec::train, &TrainSpec::nesterov).changes_run().fallback(false)
          .doc("sgd: Nesterov momentum (needs train.momentum > 0)."),
      Declare("train.weight_decay", &Spec::train, &TrainSpec::weight_decay).changes_run().fallback(0.01).range(0.0, 1.0)
          .doc("Weight decay (decoupled for adamw)."),
      Declare("train.schedule", &Spec::train, &TrainSpec::schedule).changes_run().fallback("one_cycle")
          .doc("Learning-rate schedule over all steps. one_cycle: fastai's (warm up from lr/25 to lr, then cosine "
               "annealing to lr/1e5). cosine: linear warmup, then cosine decay to 0. step: lr multiplied by "
               "`train.step_gamma` after every `train.step_every` epochs (PyTorch's StepLR; no warmup). constant: "
               "lr throughout."),
      Declare("train.warmup", &Spec::train, &TrainSpec::warmup).changes_run().fallback(0.25).range(0.0, 0.9)
          .doc("Fraction of all steps spent warming up (one_cycle's pct_start; cosine's warmup)."),
      Declare("train.step_every", &Spec::train, &TrainSpec::step_every).changes_run().fallback(30).range(1, 100000)
          .doc("schedule = \"step\": epochs between two decays of the lr."),
      Declare("train.step_gamma", &Spec::train, &TrainSpec::step_gamma).changes_run().fallback(0.1).above(0.0, 1.0)
          .doc("schedule = \"step\": the factor each decay multiplies the lr by."),
      Declare("train.lr_scaling", &Spec::train, &TrainSpec::lr_scaling).changes_run().fallback("none")
          .doc("linear: multiply train.lr by the world size x train.accumulate (the linear scaling rule with "
               "warmup, Goyal et al. 2017), so a larger global batch gets a larger step; the value is logged. "
               "none: train.lr as written."),
      Declare("train.accumulate", &Spec::train, &TrainSpec::accumulate).changes_run().fallback(1).range(1, 1024)
          .doc("Batches whose gradients are summed before one optimizer step (gradient accumulation); ranks "
               "communicate once per step."),
      Declare("train.clip_norm", &Spec::train, &TrainSpec::clip_norm).changes_run().fallback(0.0).range(0.0, 1e6)
          .doc("Clip the gradients' global norm to this after the all-reduce; 0 turns clipping off."),
      Declare("train.label_smoothing", &Spec::train, &TrainSpec::label_smoothing).changes_run().fallback(0.0).range(0.0, 0.5)
          .doc("Classification: label smoothing of the cross-entropy loss."),
      Declare("train.top_k", &Spec::train, &TrainSpec::top_k).fallback(5).range(1, 1000)
          .doc("Classification: validation also reports top-k accuracy (the target among the k highest scores), "
               "when there are more than k classes."),
      Declare("train.freeze_epochs", &Spec::train, &TrainSpec::freeze_epochs).changes_run().fallback(0).range(0, 100000)
          .doc("Fine-tuning as fastai's fine_tune: the first N of `train.epochs` train only the head (the last "
               "layer; the body's BatchNorm layers keep training), then everything trains, the body at lr x "
               "`train.body_lr_factor`. Each phase has its own `train.schedule` cycle over its steps. 0: no "
               "freezing. Use with pretrained `model.weights`."),
      Declare("train.body_lr_factor", &Spec::train, &TrainSpec::body_lr_factor).changes_run().fallback(0.01).above(0.0, 1.0)
          .doc("With `train.freeze_epochs`: the body's learning rate relative to the head's (fastai's "
               "fine_tune trains the body at lr/100)."),
      Declare("train.precision", &Spec::train, &TrainSpec::precision).changes_run().fallback("fp32")
          .doc("fp32: float32 throughout. bf16: forward passes under autocast to bfloat16 (on the CPU or the "
               "GPU); weights, gradients, optimizer state and metrics stay float32. fp16: autocast to float16 with "
               "dynamic loss scaling (as torch.cuda.amp.GradScaler: a step whose gradients overflow is skipped and "
               "the scale halved); needs a CUDA device, a CPU rank stops with a usage error."),
      Declare("train.channels_last", &Spec::train, &TrainSpec::channels_last).fallback("auto")
          .choices({"auto", "true", "false"})
          .doc("Keep images and 4-D weights in channels_last (NHWC) memory format. auto: on for the built-in "
               "convolutional nets (small_cnn and the ResNets), off for a TorchScript model, whose `view` calls may "
               "not accept NHWC tensors; true or false forces it. On the CPU ResNet-18's and -34's last stage stays NCHW for "
               "images up to 64 pixels, where that is faster. Measured on the CPU (docs/benchmarks.md): the small "
               "CNN trains 1.1-1.3x faster, ResNet-50 at 224 pixels 1.2x. Not measured on a GPU yet."),
      Declare("train.lr_find", &Spec::train, &TrainSpec::lr_find).fallback(false)
          .doc("Instead of training, run fastai's learning-rate range test: up to 100 steps with the lr growing "
               "exponentially from 1e-7 to 10, stopping when the smoothed loss passes 4x its minimum. Writes "
               "lr_find.jsonl and lr_find.html and logs the suggested train.lr (a tenth of the lr with the lowest "
               "loss) and the lr of the steepest descent; no model is saved (docs/training.md)."),
      Declare("train.early_stop.patience", &Spec::train, &TrainSpec::early_stop, &EarlyStopSpec::patience)
          .fallback(0).range(0, 100000)
          .doc("Early stopping, as fastai's EarlyStoppingCallback: the run stops after this many epochs in a row "
               "without `train.early_stop.monitor` improving by `min_delta` on its best value, all ranks at the "
               "same step. The log, run.json and report.html say where and why (docs/training.md). 0: off."),
      Declare("train.early_stop.monitor", &Spec::train, &TrainSpec::early_stop, &EarlyStopSpec::monitor)
          .fallback("valid_loss").choices(metric_names())
          .doc("The metric early stopping watches, as metrics.jsonl names it: valid_loss, accuracy, error_rate, "
               "top_k_accuracy, f1 (the mean F1 over the classes, scikit-learn's macro average) and f1:<class> (the "
               "F1 of one class, such as f1:cat) for classification, mae and mse for regression, or train_loss."),
      Declare("train.early_stop.mode", &Spec::train, &TrainSpec::early_stop, &EarlyStopSpec::mode).fallback("auto")
          .doc("min: lower is better; max: higher is better. auto: max for the accuracies and F1 scores, min for "
               "the losses and errors."),
      Declare("train.early_stop.min_delta", &Spec::train, &TrainSpec::early_stop, &EarlyStopSpec::min_delta)
          .fallback(0.0).range(0, 1e300)
          .doc("How much the monitored metric must beat its best value by to count as an improvement."),
      Declare("train.reduce_lr_on_plateau.patience", &Spec::train, &TrainSpec::reduce_lr_on_plateau,
              &LrPlateauSpec::patience)
          .changes_run().fallback(0).range(0, 100000)
          .doc("ReduceLROnPlateau, as fastai's and PyTorch's: after this many epochs in a row without "
               "`monitor` improving by `min_delta` on its best value, the lr is multiplied by `factor` (and "
               "the count starts again), on every rank from the next epoch. It multiplies whatever "
               "train.schedule gives: with schedule = \"constant\" it is fastai's fit with ReduceLROnPlateau. "
               "The log says each reduction; metrics.jsonl's lr shows it. 0: off."),
      Declare("train.reduce_lr_on_plateau.monitor", &Spec::train, &TrainSpec::reduce_lr_on_plateau,
              &LrPlateauSpec::monitor)
          .changes_run().fallback("valid_loss").choices(metric_names())
          .doc("The metric watched, as train.early_stop.monitor names them."),
      Declare("train.reduce_lr_on_plateau.mode", &Spec::train, &TrainSpec::reduce_lr_on_plateau,
              &LrPlateauSpec::mode)
          .changes_run().fallback("auto")
          .doc("min, max or auto, as train.early_stop.mode."),
      Declare("train.reduce_lr_on_plateau.min_delta", &Spec::train, &TrainSpec::reduce_lr_on_plateau,
              &LrPlateauSpec::min_delta)
          .changes_run().fallback(0.0).range(0, 1e300)
          .doc("How much the monitored metric must beat its best value by to count as an improvement."),
      Declare("train.reduce_lr_on_plateau.factor", &Spec::train, &TrainSpec::reduce_lr_on_plateau,
              &LrPlateauSpec::factor)
          .changes_run().fallback(0.1).above(0, 0.999)
          .doc("What each reduction multiplies the lr by (PyTorch's factor; fastai's factor = 10 is 0.1 here)."),
      Declare("train.reduce_lr_on_plateau.min_lr", &Spec::train, &TrainSpec::reduce_lr_on_plateau,
              &LrPlateauSpec::min_lr)
          .changes_run().fallback(0.0).range(0, 10)
          .doc("The lr the reductions stop at: the peak lr (train.lr, scaled by train.lr_scaling) times the "
               "reductions is not taken below it."),
  };
}

std::vector<Setting> dist_settings() {
  return {
      Declare("dist.backend", &Spec::dist, &DistSpec::backend).fallback("auto")
          .doc("Collective backend: auto picks nccl with CUDA and gloo otherwise."),
      Declare("dist.nproc_per_node", &Spec::dist, &DistSpec::nproc_per_node).fallback(0).allow_auto().range(1, 1024)
          .doc("Worker processes on each node: \"auto\" (one per GPU, 1 on CPU) or a number."),
      Declare("dist.timeout_s", &Spec::dist, &DistSpec::timeout_s).fallback(600).range(1, 86400)
          .doc("Seconds a collective or the rendezvous may wait before the job fails in the retryable class."),
      Declare("dist.heartbeat_s", &Spec::dist, &DistSpec::heartbeat_s).fallback(5).range(1, 3600)
          .doc("Seconds between two heartbeats: each rank publishes its step and phase (data, forward, backward, "
               "all-reduce, checkpoint, validate) to the rendezvous store, and reads the other ranks' "
               "(docs/reliability.md)."),
      Declare("dist.stall_s", &Spec::dist, &DistSpec::stall_s).fallback(300).range(1, 86400)
          .doc("Seconds after which a rank whose step and phase have not changed, or whose heartbeat stopped, is "
               "logged by every rank with its last step and phase. Only a report: the job fails when a collective "
               "outlasts `dist.timeout_s`, and that error names the stalled ranks too."),
      Declare("dist.bucket_mb", &Spec::dist, &DistSpec::bucket_mb).fallback(25).range(1, 1024)
          .doc("Size of the gradient buckets whose all-reduce overlaps backward (the first bucket is 1 MiB so "
               "communication starts early)."),
      Declare("dist.allow_unused_parameters", &Spec::dist, &DistSpec::allow_unused_parameters).fallback(false)
          .doc("Count parameters that get no gradient in a step as zero. Off: such a step fails and names them."),
  };
}

std::vector<Setting> checkpoint_settings() {
  return {
      Declare("checkpoint.every_epochs", &Spec::checkpoint, &CheckpointSpec::every_epochs).fallback(1).range(0, 100000)
          .doc("Write a checkpoint every N epochs (0: only the final model)."),
      Declare("checkpoint.every_steps", &Spec::checkpoint, &CheckpointSpec::every_steps).fallback(0)
          .range(0, 100000000)
          .doc("Also write a checkpoint every N optimizer steps within an epoch, the same exact-resume "
               "checkpoint a stopped pod writes: a pod killed without notice (kill -9, a lost node) loses at most "
               "N steps (and those taken while the newest is written: the step copies the state in memory, a "
               "thread writes and uploads it). 0: off."),
      Declare("checkpoint.every_minutes", &Spec::checkpoint, &CheckpointSpec::every_minutes).fallback(0)
          .range(0, 100000)
          .doc("Also write a checkpoint within an epoch once N minutes have passed since the last one (rank 0's "
               "clock, agreed by all ranks at a step). 0: off."),
      Declare("checkpoint.keep", &Spec::checkpoint, &CheckpointSpec::keep).fallback(3).range(1, 1000)
          .doc("Checkpoints kept; older ones are deleted, from an s3:// job.output too."),
      Declare("checkpoint.keep_best", &Spec::checkpoint, &CheckpointSpec::keep_best).fallback("none")
          .choices(with_none(metric_names()))
          .doc("A metric, as train.early_stop.monitor names them (lower is better for the losses and errors, "
               "higher for the accuracies and F1 scores): the model of the epoch where it was best "
               "is kept in best/model.pt, never rotated away, and becomes model.pt at the end; run.json's "
               "best_epoch says which epoch and the value. none: model.pt is the last epoch's."),
      Declare("checkpoint.resume", &Spec::checkpoint, &CheckpointSpec::resume).fallback("auto")
          .doc("auto: continue from the newest valid checkpoint in the output directory. never: start afresh."),
  };
}

std::vector<Setting> log_settings() {
  return {
      Declare("log.tensorboard", &Spec::log, &LogSpec::tensorboard).fallback(true)
          .doc("Write TensorBoard event files into <job.output>/tensorboard/ (rank 0): per step the training loss, "
               "lr and where the step's time went; per epoch the training and validation loss, every validation "
               "metric, lr and images (or rows) per second; the run's settings and its end in the hparams "
               "plugin, so that runs compare in the HParams tab; how a finished run came out (\"trained 10 of 10 "
               "epochs\", early stopping's verdict, keep_best's epoch) as the text \"outcome\". Flushed at every read point and epoch end, "
               "uploaded with the other outputs to an s3:// job.output; a restarted run writes a new file whose "
               "curves go on from the checkpoint's step. Written by a thread of its own: a failure is one "
               "warning and training goes on. `tensorboard --logdir <job.output>/tensorboard` shows it "
               "(docs/training.md)."),
      Declare("log.mlflow_uri", &Spec::log, &LogSpec::mlflow_uri).optional()
          .doc("An MLflow tracking server, such as http://mlflow.mlflow:5000, that rank 0 logs the run to: the "
               "experiment MLFLOW_EXPERIMENT_NAME (created when missing; unset: the server's Default), a run "
               "named `job.name` and tagged with the repository, commit and run key (mlflow.source.*, "
               "trainpoint.run_key), the settings as params, the TensorBoard values above as metrics at every "
               "read point, model.pt, report.html and metrics.jsonl as artifacts through the server's artifact "
               "proxy, how a finished run came out as the tag trainpoint.outcome, and FINISHED, FAILED or KILLED at "
               "the end. A resumed run continues its MLflow run. Unset: "
               "MLFLOW_TRACKING_URI; with neither, nothing is sent. MLFLOW_TRACKING_TOKEN (a bearer token) or "
               "MLFLOW_TRACKING_USERNAME and _PASSWORD authenticate, MLFLOW_RUN_ID joins a given run. A server "
               "that is down or fails is one warning; training goes on (docs/training.md)."),
  };
}

std::vector<Setting> notify_settings() {
  return {
      Declare("notify.webhooks", &Spec::notify, &NotifySpec::webhooks)
          .fallback(std::vector<std::string>{"env:TRAINPOINT_NOTIFY_WEBHOOK"})
          .doc("Webhooks the pod of rank 0 tells of the job's end and of stalled ranks (docs/training.md, \"Told "
               "when it ends\"): http(s) URLs, or \"env:NAME\" for the URL in the environment variable NAME. A Slack "
               "or Teams URL is a secret (whoever has it may post): keep it in k8s.secret's Secret as "
               "TRAINPOINT_NOTIFY_WEBHOOK, which the default names, not in the spec. An env: entry whose variable is "
               "unset is skipped. []: none."),
      Declare("notify.format", &Spec::notify, &NotifySpec::format).fallback("auto")
          .choices({"auto", "json", "slack", "teams"})
          .doc("The body posted: slack ({\"text\": ...}), teams (an Adaptive Card message, as Teams' workflow "
               "webhooks take), json (event, job, source, exit code and class, error, metrics, outputs, report). "
               "auto: slack for hooks.slack.com, teams for *.webhook.office.com and *.logic.azure.com, else json."),
      Declare("notify.on", &Spec::notify, &NotifySpec::on)
          .fallback(std::vector<std::string>{"finished", "failed", "stalled"})
          .choices({"finished", "failed", "stalled"})
          .doc("What is told: finished (with the last epoch's metrics), failed (a permanent failure, with its "
               "line; a retryable one restarts the pod and tells nothing), stalled (ranks without progress for "
               "dist.stall_s, once per stall)."),
  };
}

std::vector<Setting> report_settings() {
  return {
      Declare("report.top_losses", &Spec::report, &ReportSpec::top_losses).fallback(16).range(0, 1000)
          .doc("Classification with the built-in engine: interpretation.json and report.html list the N validation "
               "samples with the highest loss at the end of training, each with its predicted and actual class, "
               "its loss and its file (relative to the data's folder) or CSV line, for image data with a "
               "thumbnail of what the model saw. 0: none (the confusion matrix and per-class scores stay) "
               "(docs/training.md, \"What the model gets wrong\")."),
  };
}

std::vector<Setting> k8s_settings() {
  return {
      Declare("k8s.kind", &Spec::k8s, &K8sSpec::kind).fallback("pytorchjob").choices({"pytorchjob", "trainjob"})
          .doc("render-job: a Kubeflow PyTorchJob (kubeflow.org/v1, training-operator v1.9) or a Kubeflow Trainer "
               "v2.2 TrainJob (trainer.kubeflow.org/v1alpha1, its pods set by `runtimePatches`)."),
      Declare("k8s.name", &Spec::k8s, &K8sSpec::name).optional()
          .doc("render-job: the job's name in Kubernetes (lowercase letters, digits, '-'). Unset: `job.name`."),
      Declare("k8s.namespace", &Spec::k8s, &K8sSpec::name_space).optional()
          .doc("render-job: the namespace. Unset: the one kubectl uses."),
      Declare("k8s.image", &Spec::k8s, &K8sSpec::image).optional()
          .doc("render-job: the trainpoint image the pods run. Required by render-job (here or --image)."),
      Declare("k8s.workers", &Spec::k8s, &K8sSpec::workers).fallback(1).range(1, 10000)
          .doc("render-job: pods (nodes) in the job; the first is the master."),
      Declare("k8s.gpus_per_worker", &Spec::k8s, &K8sSpec::gpus_per_worker).fallback(0).range(0, 64)
          .doc("render-job: GPUs of each pod (nvidia.com/gpu), one training process each. 0: CPU, with "
               "`dist.nproc_per_node` processes."),
      Declare("k8s.cpu", &Spec::k8s, &K8sSpec::cpu).optional()
          .doc("render-job: CPU requested and limited per pod, a Kubernetes quantity such as \"8\" or \"7500m\"."),
      Declare("k8s.memory", &Spec::k8s, &K8sSpec::memory).optional()
          .doc("render-job: memory requested and limited per pod, such as \"32Gi\" (includes /dev/shm)."),
      Declare("k8s.shm_size", &Spec::k8s, &K8sSpec::shm_size).optional()
          .doc("render-job: size limit of /dev/shm, a memory-backed emptyDir. Unset: no limit beyond `k8s.memory`."),
      Declare("k8s.scratch", &Spec::k8s, &K8sSpec::scratch).optional()
          .doc("render-job: a directory on the node (hostPath) for checkouts, git mirrors and staged data, kept "
               "across pod restarts; it must be writable by the image's user (uid 1000). Unset: an emptyDir per pod."),
      Declare("k8s.backoff_limit", &Spec::k8s, &K8sSpec::backoff_limit).fallback(3).range(0, 1000)
          .doc("render-job: pod restarts after retryable failures (exit codes 128-255) before the job fails."),
      Declare("k8s.grace_s", &Spec::k8s, &K8sSpec::grace_s).fallback(60).range(5, 86400)
          .doc("The pods' terminationGracePeriodSeconds: after SIGTERM (preemption, a node drain) every rank stops "
               "at one step and a checkpoint is written within this time. `run` warns when a checkpoint takes more "
               "than half of it to save; a node's launcher gives its workers this long before SIGKILL."),
      Declare("k8s.secret", &Spec::k8s, &K8sSpec::secret).optional()
          .doc("render-job: a Secret whose keys TRAINPOINT_GIT_TOKEN, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and "
               "TRAINPOINT_NOTIFY_WEBHOOK (each optional) become the pods' environment. The manifest names the "
               "Secret, never its values."),
      Declare("k8s.vault_role", &Spec::k8s, &K8sSpec::vault_role).optional()
          .doc("render-job: the Vault role of the platform's Vault agent, which writes MinIO keys to "
               "/vault/secrets/minio-<k8s.vault_tenant> (with vault_tenant and vault_path)."),
      Declare("k8s.vault_tenant", &Spec::k8s, &K8sSpec::vault_tenant).optional()
          .doc("render-job: the MinIO tenant of the Vault secret, such as \"standard\"."),
      Declare("k8s.vault_path", &Spec::k8s, &K8sSpec::vault_path).optional()
          .doc("render-job: the Vault path holding accessKeyId and secretAccessKey, such as "
               "\"minio_standard/keys/profile-team\"."),
      Declare("k8s.metrics_port", &Spec::k8s, &K8sSpec::metrics_port).fallback(9400).range(0, 65535)
          .doc("render-job: the pods serve Prometheus metrics on this port (`job.metrics_port`), announced by the "
               "prometheus.io/scrape, port and path annotations (and the container port of a PyTorchJob). 0: none."),
      Declare("k8s.node_selector", &Spec::k8s, &K8sSpec::node_selector)
          .fallback(std::map<std::string, std::string>{}).entries(check_label_key)
          .doc("render-job: node labels the pods must run on, such as { \"nvidia.com/gpu.product\" = "
               "\"NVIDIA-H100-80GB-HBM3\" } for a GPU type (the pods' nodeSelector)."),
      Declare("k8s.tolerations", &Spec::k8s, &K8sSpec::tolerations).fallback(std::vector<std::string>{})
          .doc("render-job: taints the pods tolerate, in kubectl taint's words: \"KEY=VALUE:EFFECT\" (Equal), "
               "\"KEY:EFFECT\" or \"KEY\" (Exists; without an effect, every effect), such as "
               "[\"nvidia.com/gpu:NoSchedule\"]."),
      Declare("k8s.queue", &Spec::k8s, &K8sSpec::queue).optional()
          .doc("render-job: the Kueue LocalQueue: the job is labelled kueue.x-k8s.io/queue-name and created "
               "suspended, and Kueue starts it when the queue admits it."),
      Declare("k8s.priority_class", &Spec::k8s, &K8sSpec::priority_class).optional()
          .doc("render-job: the pods' PriorityClass (priorityClassName). PyTorchJob only: Trainer v2.2's "
               "runtimePatches cannot set it (the TrainingRuntime does)."),
      Declare("k8s.active_deadline_s", &Spec::k8s, &K8sSpec::active_deadline_s).fallback(0).range(0, 31536000)
          .doc("render-job: the job fails once it has run this long (activeDeadlineSeconds). 0: no limit."),
      Declare("k8s.ttl_s", &Spec::k8s, &K8sSpec::ttl_s).fallback(0).range(0, 31536000)
          .doc("render-job: a finished job, its pods and their logs are deleted this long after it ended "
               "(ttlSecondsAfterFinished). 0: kept until deleted. PyTorchJob only: a TrainJob has no such field."),
      Declare("k8s.service_account", &Spec::k8s, &K8sSpec::service_account).optional()
          .doc("render-job: the pods' service account (serviceAccountName). Unset: the namespace's default."),
      Declare("k8s.image_pull_secret", &Spec::k8s, &K8sSpec::image_pull_secret).optional()
          .doc("render-job: a Secret of type kubernetes.io/dockerconfigjson with which the nodes pull `k8s.image` "
               "from a private registry (imagePullSecrets)."),
      Declare("k8s.volumes", &Spec::k8s, &K8sSpec::volumes)
          .fallback(std::map<std::string, std::string>{}).entries(check_claim_name)
          .doc("render-job: PersistentVolumeClaims mounted in every pod, claim name = mount path, such as "
               "{ team-data = \"/data\" }. A ReadWriteOnce claim mounts on one node only: one pod, or "
               "ReadWriteMany."),
  };
}

std::vector<Setting> declare_all() {
  std::vector<Setting> all;
  // In the order docs/spec.md and `check` show them.
  for (const auto& section : {job_settings, data_settings, model_settings, train_settings, dist_settings,
                              checkpoint_settings, log_settings, report_settings, notify_settings, k8s_settings}) {
    std::vector<Setting> declared = section();
    all.insert(all.end(), std::make_move_iterator(declared.begin()), std::make_move_iterator(declared.end()));
  }
  return all;
}

}  // namespace

const std::vector<Setting>& settings() {
  static const std::vector<Setting> all = declare_all();
  return all;
}

const Setting* find_setting(const std::string& key) {
  for (const auto& setting : settings()) {
    if (setting.key == key) return &setting;
  }
  return nullptr;
}

std::string kind_name(const Setting& setting) {
  switch (setting.kind) {
    case Kind::boolean: return "boolean";
    case Kind::integer: return setting.allow_auto ? "integer or \"auto\"" : "integer";
    case Kind::number: return "number";
    case Kind::string: return "string";
    case Kind::choice: return setting.takes_booleans() ? "boolean or string" : "string";
    case Kind::integer_list: return "array of integers";
    case Kind::string_list: return "array of strings";
    case Kind::string_table: return "table of strings";
  }
  return "value";
}

std::string to_toml(const Value& value) {
  struct Printer {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const {
      std::string text = fmt::format("{}", v);
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      return text;
    }
    std::string operator()(const std::string& v) const {
      // TOML basic strings hold no raw control characters: they are escaped.
      std::string quoted = "\"";
      for (char c : v) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
          quoted += '\\';
          quoted += c;
        } else if (c == '\n') {
          quoted += "\\n";
        } else if (c == '\t') {
          quoted += "\\t";
        } else if (byte < 0x20 || byte == 0x7F) {
          quoted += fmt::format("\\u{:04X}", byte);
        } else {
          quoted += c;
        }
      }
      return quoted + "\"";
    }
    std::string operator()(const std::vector<std::int64_t>& v) const { return fmt::format("[{}]", fmt::join(v, ", ")); }
    std::string operator()(const std::vector<std::string>& v) const {
      std::vector<std::string> items;
      for (const auto& item : v) items.push_back((*this)(item));
      return fmt::format("[{}]", fmt::join(items, ", "));
    }
    std::string operator()(const std::map<std::string, std::string>& v) const {
      std::vector<std::string> items;
      // A name TOML cannot take bare (a label key's '.' and '/') is quoted.
      const auto bare = [](const std::string& name) {
        return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
        });
      };
      for (const auto& [name, value] : v) {
        items.push_back(fmt::format("{} = {}", bare(name) ? name : (*this)(name), (*this)(value)));
      }
      return items.empty() ? "{}" : fmt::format("{{ {} }}", fmt::join(items, ", "));
    }
  };
  return std::visit(Printer{}, value);
}

}  // namespace tp::spec
