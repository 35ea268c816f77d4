#include "train/trainer.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/time.h"
#include "data/loader.h"
#include "dist/gradient_sync.h"
#include "dist/topology.h"
#include "model/model.h"
#include "storage/run_identity.h"
#include "telemetry/run_sinks.h"
#include "train/checkpoint.h"
#include "train/checkpoint_writer.h"
#include "train/evaluation.h"
#include "train/gpu_step_time.h"
#include "train/metric_tracker.h"
#include "train/monitor.h"
#include "train/precision.h"
#include "train/report.h"
#include "train/run_checkpoints.h"
#include "train/sample_trace.h"
#include "train/schedule.h"
#include "train/step_losses.h"
#include "train/training_step.h"

namespace tp::train {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// What the ranks agree on at a read point (train/step_losses.h), in one all-reduce: whether any was asked to
// stop (SIGTERM), so that all stop at the same step; whether any read a loss that is not finite, so that all
// fail alike; whether rank 0's clock says a checkpoint is due (checkpoint.every_minutes); and the next read
// point.
struct ReadPointAgreement {
  bool stop;
  bool diverged;
  bool checkpoint_due;
};
ReadPointAgreement agree_at_read_point(dist::Communicator& communicator, ReadPoints& reads, std::int64_t step,
                                       bool diverged, bool checkpoint_due) {
  const bool rank_0_due = communicator.rank() == 0 && checkpoint_due;
  const std::vector<std::int64_t> sums = dist::sum_over_ranks(
      communicator, std::vector<std::int64_t>{stop_requested() ? 1 : 0, diverged ? 1 : 0, rank_0_due ? 1 : 0,
                                              reads.propose()});
  reads.agreed(step, sums[3], communicator.world_size());
  return {sums[0] > 0, sums[1] > 0, sums[2] > 0};
}

// The next batch, with the phase published while it loads.
std::optional<data::Batch> next_batch(data::Loader& loader, dist::Communicator& communicator, std::int64_t step) {
  communicator.set_progress(step, dist::Phase::data);
  return loader.next();
}

// Every rank's bad files, sorted and without duplicates.
std::vector<std::string> all_bad_files(const data::BadFiles& bad_files, dist::Communicator& communicator) {
  const std::vector<std::string> gathered = dist::all_gather_strings(communicator, bad_files.files());
  const std::set<std::string> all(gathered.begin(), gathered.end());
  return {all.begin(), all.end()};
}

// On the CPU, so that the model loads anywhere (Python's torch.jit.load puts tensors where they were).
void write_model(torch::jit::Module& model, const fs::path& file) {
  const fs::path temporary = temporary_sibling(file);
  model.to(torch::kCPU);
  model.eval();
  model.save(temporary.string());
  commit_file(temporary, file);
}

// checkpoint.keep_best: the model of the best epoch so far, beside the run's checkpoints (which are rotated
// away; it is not).
fs::path best_model_path(const fs::path& checkpoint_directory, std::int64_t epoch) {
  return checkpoint_directory / fmt::format("{}{:06d}.pt", storage::kBestModelPrefix, epoch);
}

// The best models in `checkpoint_directory` but epoch `kept`'s (0: all of them).
std::vector<fs::path> other_best_models(const fs::path& checkpoint_directory, std::int64_t kept) {
  std::vector<fs::path> others;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(checkpoint_directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(storage::kBestModelPrefix, 0) == 0 && entry.path().extension() == ".pt" &&
        entry.path() != best_model_path(checkpoint_directory, kept)) {
      others.push_back(entry.path());
    }
  }
  return others;
}

// Rank 0's answer to a question only it can answer, on every rank.
bool agreed_by_rank_0(bool answer, dist::Communicator& communicator) {
  return dist::any_rank(communicator, communicator.rank() == 0 && answer);
}

// How long an epoch's end waits for the sinks to write its records before publishing their files: a sink that
// hangs delays publishing, not training.
constexpr std::chrono::seconds kSinkFlushWait{10};
// How long the end of a run waits for the sinks to write (and upload) what they were given.
constexpr std::chrono::seconds kSinkCloseWait{120};

// The run's settings for the sinks' comparison of runs (TensorBoard's HParams tab): those that change what a run
// computes, with train.epochs and the world size.
telemetry::HParams hparams_of(const spec::Spec& spec, int world_size, std::int64_t global_batch) {
  telemetry::HParams hparams;
  for (const spec::RunSetting& setting : spec::run_settings(spec)) {
    hparams[setting.key] = std::visit(
        [](const auto& value) -> telemetry::HParam {
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::int64_t>) return static_cast<double>(value);
          else return value;
        },
        setting.value);
  }
  hparams["train.epochs"] = static_cast<double>(spec.train.epochs);
  hparams["world_size"] = static_cast<double>(world_size);
  hparams["global_batch"] = static_cast<double>(global_batch);
  return hparams;
}

// train.lr, or with linear scaling (Goyal et al. 2017) train.lr x the global batch's factor (with warmup).
double peak_lr(const spec::TrainSpec& train, double global_batch_factor) {
  switch (train.lr_scaling) {
    case spec::LrScaling::none: return train.lr;
    case spec::LrScaling::linear: return train.lr * global_batch_factor;
  }
  spec::unhandled(train.lr_scaling);
}

// The per-epoch metrics the spec has the run watch (early stopping, keep_best, the lr's plateau), each with the
// key that names it.
std::vector<std::pair<std::string, std::string>> watched_metrics(const spec::Spec& spec) {
  std::vector<std::pair<std::string, std::string>> watched;
  if (spec.train.early_stop.patience > 0) watched.emplace_back("train.early_stop.monitor", spec.train.early_stop.monitor);
  if (spec.checkpoint.keep_best != "none") watched.emplace_back("checkpoint.keep_best", spec.checkpoint.keep_best);
  if (spec.train.reduce_lr_on_plateau.patience > 0) {
    watched.emplace_back("train.reduce_lr_on_plateau.monitor", spec.train.reduce_lr_on_plateau.monitor);
  }
  return watched;
}

// What the monitor needs to know of the run.
MonitorSettings monitor_settings(const spec::Spec& spec, const dist::Communicator& communicator,
                                 const FitEnvironment& environment, std::int64_t total_steps, std::int64_t first_step) {
  MonitorSettings settings;
  settings.job = spec.job.name;
  settings.rank = communicator.rank();
  settings.local_rank = environment.local_rank;
  settings.metrics_port = static_cast<int>(spec.job.metrics_port);
  settings.total_steps = total_steps;
  settings.total_epochs = spec.train.epochs;
  settings.first_step = first_step;
  if (environment.device.is_cuda()) settings.cuda_device = environment.device.index();
  return settings;
}

// The optimizer's parameter groups: one, or when fine-tuning two, the body and the head, so the body can
// have its own lr.
std::vector<torch::optim::OptimizerParamGroup> parameter_groups(const torch::jit::Module& model,
                                                                const Parameters& placed, bool fine_tune) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!fine_tune) {
    groups.emplace_back(placed.tensors);
    return groups;
  }
  const std::vector<std::string> head = model::head_parameter_names(model);
  std::vector<torch::Tensor> body_parameters, head_parameters;
  for (std::size_t i = 0; i < placed.tensors.size(); ++i) {
    const bool in_head = std::find(head.begin(), head.end(), placed.names[i]) != head.end();
    (in_head ? head_parameters : body_parameters).push_back(placed.tensors[i]);
  }
  groups.emplace_back(body_parameters);
  groups.emplace_back(head_parameters);
  return groups;
}

// What an epoch's steps leave for its end.
struct TrainedEpoch {
  std::int64_t index = 0;  // 0-based
  Clock::time_point started = Clock::now();
  Totals totals;  // this rank's training totals
  double lr = 0;  // the last step's
  EpochThroughput throughput;
};

// One epoch while its steps run: this rank's samples from where the epoch stands, their loader, and what the
// steps add up.
struct EpochSteps {
  EpochSteps(std::int64_t index, std::int64_t first_sample, std::vector<std::size_t> samples,
             const data::Datasets& data, const data::LoaderOptions& options, c10::Device device)
      : first_sample(first_sample),
        indices(std::move(samples)),
        loader(data.train, indices, index, options),
        gpu_timer(GpuStepTimer::on(device)),
        losses(index) {
    trained.index = index;
  }

  TrainedEpoch trained;
  const std::int64_t first_sample;  // of the epoch's global order: above 0 when an interrupted epoch goes on
  const std::vector<std::size_t> indices;
  data::Loader loader;
  std::optional<log::Progress> progress;  // rank 0 speaks for the job
  StepTimer timer;  // the host's time, which decides the read points
  std::unique_ptr<GpuStepTimer> gpu_timer;  // on a GPU, where its time goes: the records' step times
  StepLosses losses;
  std::int64_t step_samples = 0;  // this rank's, in the current step

  void start_timing() {
    timer.start();
    if (gpu_timer) gpu_timer->start();
  }
  void enter(StepPart part) {
    timer.enter(part);
    if (gpu_timer) gpu_timer->enter(part);
  }
};

// The checkpoint a stop request saved, and how long it took.
struct StopCheckpoint {
  fs::path file;
  double seconds = 0;
};

// One call of fit: the run set up, resumed, trained epoch by epoch and finished, on one rank. Every method
// that communicates is called at the same point on every rank.
class Fit {
 public:
  Fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec, dist::Communicator& communicator,
      const fs::path& output_dir, const RunOrigin& origin, const FitEnvironment& environment);
  // A run that did not finish tells its sinks how it ended: stopped by a signal (to resume) or failed.
  ~Fit() {
    if (sinks_ && !finished_) sinks_->run_ended(stopped_ ? telemetry::RunEnd::killed : telemetry::RunEnd::failed);
  }
  Fit(const Fit&) = delete;
  Fit& operator=(const Fit&) = delete;

  // Resumes from the newest checkpoint of this run that any rank holds (or, with checkpoint.resume =
  // "never", forgets an earlier start's). Returns whether the run is already complete.
  bool resume();
  // The result of a run found complete: nothing is trained or rewritten.
  FitResult already_complete();
  // Before the first epoch trained here: the old final outputs removed, the ranks on rank 0's weights, the
  // records and the monitor opened.
  void start();
  std::int64_t first_epoch() const { return position_.epochs_done; }
  // Early stopping (train.early_stop) stopped the run after the last epoch trained; the same on every rank.
  bool stopped_early() const { return stopped_early_; }
  // Trains `epoch` (its remaining samples when it was interrupted); a stop request throws here.
  TrainedEpoch train_epoch(std::int64_t epoch);
  // After an epoch's steps: validation, the records and report, the due checkpoint, the epoch's line.
  void end_epoch(const TrainedEpoch& epoch);
  // After the last epoch: the report, model.pt and run.json.
  FitResult finish();

 private:
  double lr_at(double epochs_trained) const;
  void enter_fine_tune_phase(std::int64_t epoch);
  // Samples of the epoch's global order trained once this rank has trained `batches` batches of it.
  std::int64_t samples_done_after(const EpochSteps& epoch, std::size_t batches) const;
  void train_batch(EpochSteps& epoch, const data::Batch& batch, bool stepping);
  void take_step(EpochSteps& epoch);
  // What a checkpoint at this step holds besides the model and optimizer (the position, the epoch's totals over
  // all ranks: collective), the step's time from here on counted as checkpointing.
  CheckpointState mid_epoch_state(EpochSteps& epoch);
  // A stop request at this step: one checkpoint on every rank that keeps them.
  StopCheckpoint save_stop_checkpoint(EpochSteps& epoch);
  // checkpoint.every_steps or every_minutes at this step: the same checkpoint, written beside training
  // (background_writes_), older ones pruned once it is written.
  void save_periodic_checkpoint(EpochSteps& epoch);
  // Rank 0: the epoch's metrics given to the trackers; whether it is keep_best's best so far.
  bool track(const EpochMetrics& m);
  // Rank 0, on a resume: the trackers fed the epochs the resumed checkpoint had trained (metrics.jsonl).
  void replay_trackers();
  // The lr's reductions on a plateau so far, from rank 0 to the others. Collective.
  void share_lr_reductions();
  void save_best_model(std::int64_t epoch);
  // After an early stop before the last epoch: interpretation.json of the model as it stopped.
  void interpret_after_early_stop();
  // keep_best's model of the best epoch, when it is on disk.
  std::optional<fs::path> kept_best_model() const;
  // model.pt: keep_best's best epoch's model, else the model as training left it.
  void write_final_model();
  // What run.json says of early stopping and keep_best.
  void add_tracked(nlohmann::json& record) const;
  // Rank 0, after an epoch that reduced the lr: what the plateau was and the lr from now on.
  void log_lr_reduction() const;
  // Why the run stops early and where (run.json's and metrics.jsonl's `early_stop`), once it does.
  nlohmann::json early_stop_record() const;
  // The same in words, for the sinks: why the run ended where it did, and which epoch's model model.pt is.
  std::string outcome() const;
  // With `predictions`, validation keeps each sample's (the run's last epoch, for interpretation.json).
  EpochMetrics measure(const TrainedEpoch& epoch, Predictions* predictions);
  std::optional<double> save_epoch_checkpoint();
  void log_resumed() const;
  // What the run is, for its sinks.
  telemetry::RunSinksSettings run_sinks_settings() const;
  void publish(const fs::path& file) const {
    if (environment_.publish) environment_.publish(file);
  }
  // The sinks' files, once what was recorded so far is written (or the wait ran out).
  void publish_sinks();
  const Interpretation* interpretation() const { return interpretation_ ? &*interpretation_ : nullptr; }

  torch::jit::Module& model_;
  const data::Datasets& data_;
  const spec::Spec& spec_;
  dist::Communicator& communicator_;
  const fs::path output_dir_;
  const FitEnvironment& environment_;
  const c10::Device device_;
  const Clock::time_point started_ = Clock::now();
  const RunFacts facts_;
  const bool writer_;
  const RunCheckpoints checkpoints_;
  Precision precision_;
  Parameters placed_;
  const bool fine_tune_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  const EpochSamples samples_;  // which samples each epoch has, split across the ranks
  const std::int64_t accumulate_;
  const std::size_t batch_size_;
  const std::int64_t global_batch_;
  const double global_batch_factor_;
  const double peak_lr_;
  const std::int64_t steps_per_epoch_;
  const std::int64_t top_k_;

  TrainingPosition position_;
  std::optional<Checkpoint> resumed_;
  Totals resumed_totals_;  // the interrupted epoch's, on rank 0 (the epoch's totals are summed over ranks)
  std::optional<dist::GradientSynchronizer> synchronizer_;
  std::optional<bool> body_frozen_;
  std::unique_ptr<MetricsLog> metrics_;  // rank 0
  std::optional<Interpretation> interpretation_;  // rank 0, after the last epoch: interpretation.json's
  std::unique_ptr<telemetry::Sinks> sinks_;  // rank 0: the records' other destinations (log.tensorboard)
  bool sinks_behind_warned_ = false;
  bool finished_ = false;  // the sinks were told the run finished
  bool stopped_ = false;   // stopped by a signal, to resume
  std::optional<RunMonitor> monitor_;
  std::optional<MetricTracker> early_stop_;  // rank 0, with train.early_stop.patience
  std::optional<MetricTracker> best_;        // rank 0, with checkpoint.keep_best
  std::optional<LrPlateau> plateau_;  // every rank, with train.reduce_lr_on_plateau.patience; fed on rank 0
  bool lr_reduced_ = false;           // rank 0: after the epoch tracked last
  std::optional<std::string> early_stop_verdict_;  // rank 0: why the run stops early
  bool stopped_early_ = false;
  Clock::time_point last_checkpoint_ = Clock::now();  // checkpoint.every_minutes counts from here
  SampleTrace trace_;
  ReadPoints reads_;
  FitResult result_;
  // Last: destroyed first, so that a write still going on finishes while what it uses is there.
  CheckpointWriter background_writes_{write_checkpoint};
};

Fit::Fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec, dist::Communicator& communicator,
         const fs::path& output_dir, const RunOrigin& origin, const FitEnvironment& environment)
    : model_(model),
      data_(data),
      spec_(spec),
      communicator_(communicator),
      output_dir_(output_dir),
      environment_(environment),
      device_(environment.device),
      facts_{origin, spec, data, communicator.world_size(), utc_timestamp()},
      writer_(communicator.rank() == 0),
      checkpoints_(run_checkpoints_of(environment, output_dir, communicator)),
      precision_(spec.train.precision, device_),
      placed_(place_model(model, spec, device_)),
      fine_tune_(spec.train.freeze_epochs > 0),
      optimizer_(make_optimizer(spec.train, parameter_groups(model, placed_, fine_tune_))),
      samples_(data, spec, communicator),
      accumulate_(spec.train.accumulate),
      batch_size_(static_cast<std::size_t>(spec.train.batch_size)),
      global_batch_(spec.train.batch_size * communicator.world_size() * accumulate_),
      global_batch_factor_(static_cast<double>(communicator.world_size() * accumulate_)),
      peak_lr_(peak_lr(spec.train, global_batch_factor_)),
      steps_per_epoch_((static_cast<std::int64_t>((samples_.per_rank(0) + batch_size_ - 1) / batch_size_) +
                        accumulate_ - 1) /
                       accumulate_),
      top_k_(reports_top_k(data.schema, spec.train.top_k) ? spec.train.top_k : 0),
      trace_(communicator.rank()) {
  if (writer_) fs::create_directories(output_dir);
  // Every rank checks, and fails alike.
  for (const auto& [setting, metric] : watched_metrics(spec)) {
    check_metric_of_classes(setting, metric, data.schema.class_names);
  }
  if (spec.train.reduce_lr_on_plateau.patience > 0) plateau_.emplace(spec.train.reduce_lr_on_plateau, peak_lr_);
  if (writer_ && spec.train.early_stop.patience > 0) {
    early_stop_.emplace("train.early_stop.monitor", spec.train.early_stop.monitor, spec.train.early_stop.mode,
                        spec.train.early_stop.min_delta);
  }
  if (writer_ && spec.checkpoint.keep_best != "none") {
    best_.emplace("checkpoint.keep_best", spec.checkpoint.keep_best, spec::MetricMode::automatic, 0.0);
  }
  model.train();
}

bool Fit::resume() {
  if (spec_.checkpoint.resume == spec::Resume::never) {
    if (checkpoints_.keeps) forget_checkpoints(checkpoints_.directory, environment_, writer_);
  } else {
    resumed_ = agree_on_checkpoint(newest_checkpoint(checkpoints_.directory), communicator_, checkpoints_);
  }
  if (resumed_) {
    apply_checkpoint(*resumed_, model_, *optimizer_);
    position_ = resumed_->state.position;
    if (writer_) {
      resumed_totals_.loss_sum = resumed_->state.train_loss_sum;
      resumed_totals_.count = resumed_->state.train_count;
    }
  }
  if (writer_) replay_trackers();
  if (plateau_) share_lr_reductions();
  stopped_early_ = agreed_by_rank_0(early_stop_verdict_.has_value(), communicator_);
  // A run that already ran its epochs (or stopped early) and wrote its final outputs is complete: it is not
  // done again.
  return (position_.epochs_done >= spec_.train.epochs || stopped_early_) &&
         agreed_by_rank_0(environment_.final_outputs_present, communicator_);
}

void Fit::replay_trackers() {
  for (const EpochMetrics& m : read_epoch_metrics(output_dir_)) {
    if (m.epoch > position_.epochs_done) break;
    track(m);
  }
  if (!best_ || !checkpoints_.keeps) return;
  // A best model of an epoch the resumed checkpoint had not reached is not this run's.
  const std::int64_t kept = best_->best() ? best_->best()->epoch : 0;
  for (const fs::path& stale : other_best_models(checkpoints_.directory, kept)) {
    fs::remove(stale);
    if (environment_.withdraw) environment_.withdraw(stale);
  }
}

bool Fit::track(const EpochMetrics& m) {
  const bool best = best_ && best_->add(m);
  if (early_stop_) {
    early_stop_->add(m);
    early_stop_verdict_ = early_stop_verdict(*early_stop_, spec_.train.early_stop.patience);
  }
  // A run that stops here trains at no other lr.
  lr_reduced_ = plateau_ && plateau_->add(m) && !early_stop_verdict_;
  return best;
}

void Fit::share_lr_reductions() {
  const std::int64_t on_rank_0 = dist::sum_over_ranks(communicator_, std::vector<std::int64_t>{
                                                                          writer_ ? plateau_->reductions() : 0})[0];
  while (plateau_->reductions() < on_rank_0) plateau_->reduce();
}

FitResult Fit::already_complete() {
  FitResult result;
  result.already_complete = true;
  if (writer_) {
    const std::vector<EpochMetrics> epochs = read_epoch_metrics(output_dir_);
    if (!epochs.empty()) result.last = epochs.back();
    spdlog::info("the run is already complete: {} epochs trained (train.epochs = {}, last checkpoint {}); "
                 "nothing is trained or rewritten", position_.epochs_done, spec_.train.epochs, resumed_->file.string());
  }
  communicator_.barrier();
  return result;
}

void Fit::log_resumed() const {
  spdlog::info("resumed from {} after epoch {}{} (step {})", resumed_->file.string(), position_.epochs_done,
               position_.samples_done > 0 ? fmt::format(" and {} samples of epoch {}", position_.samples_done,
                                                        position_.epochs_done + 1)
                                          : "",
               position_.step);
  if (resumed_->state.world_size == communicator_.world_size()) return;
  const double old_factor = static_cast<double>(resumed_->state.world_size * accumulate_);
  spdlog::info("the world size changed from {} to {}: global batch {} -> {}{}; {}", resumed_->state.world_size,
               communicator_.world_size(), spec_.train.batch_size * resumed_->state.world_size * accumulate_,
               global_batch_,
               spec_.train.lr_scaling == spec::LrScaling::linear
                   ? fmt::format(", peak lr {:g} -> {:g} (linear scaling)", spec_.train.lr * old_factor, peak_lr_)
                   : "",
               position_.samples_done > 0 ? "the interrupted epoch's remaining samples are split over the new "
                                            "ranks, each trained once; the schedule goes on by samples seen"
                                          : "the schedule goes on by samples seen");
}

telemetry::RunSinksSettings Fit::run_sinks_settings() const {
  telemetry::RunSinksSettings settings;
  settings.output_dir = output_dir_;
  settings.first_step = position_.step;
  settings.resumed = resumed_.has_value();
  settings.tensorboard = spec_.log.tensorboard;
  settings.mlflow_uri = spec_.log.mlflow_uri;
  settings.run_name = spec_.job.name;
  settings.source = {facts_.origin.repo, facts_.origin.commit, facts_.origin.ref, facts_.origin.spec_name};
  settings.mlflow_run_file = checkpoints_.directory / storage::kMlflowRunFile;
  if (environment_.identity) {
    settings.run_key = environment_.identity->key();
    settings.run_digest = environment_.identity->digest();
  }
  return settings;
}

void Fit::start() {
  if (resumed_ && writer_) log_resumed();
  // The final outputs of an earlier run go first: only a run that finishes writes them again. Its
  // interpretation.json goes when epochs remain: the last of them writes it anew.
  if (writer_) {
    fs::remove(output_dir_ / "run.json");
    fs::remove(output_dir_ / "model.pt");
    if (position_.epochs_done < spec_.train.epochs) fs::remove(output_dir_ / "interpretation.json");
  }
  start_from_rank_0(model_, placed_.tensors, communicator_);  // after rank 0 resumed
  // Built again whenever fine-tuning freezes or unfreezes the body (at the same epoch on every rank).
  if (!fine_tune_) synchronize_trainable(synchronizer_, placed_, spec_, communicator_);
  if (writer_) {
    spdlog::info("training {} samples ({} per rank, {} steps per epoch), validating on {}; world size {}; global "
                 "batch {}; peak lr {:g}{}",
                 data_.train->size(), samples_.per_rank(0), steps_per_epoch_, data_.valid ? data_.valid->size() : 0,
                 communicator_.world_size(), global_batch_, peak_lr_,
                 spec_.train.lr_scaling == spec::LrScaling::linear
                     ? fmt::format(" (train.lr {:g} x {:g}, linear scaling)", spec_.train.lr, global_batch_factor_)
                     : "");
    metrics_ = std::make_unique<MetricsLog>(output_dir_, position_.epochs_done, position_.step);
    sinks_ = telemetry::open_run_sinks(run_sinks_settings(), [](const char* name) { return std::getenv(name); },
                                       kSinkCloseWait);
    sinks_->run_started(hparams_of(spec_, communicator_.world_size(), global_batch_));
  }
  install_stop_handlers();
  monitor_.emplace(
      monitor_settings(spec_, communicator_, environment_, steps_per_epoch_ * spec_.train.epochs, position_.step),
      dist::process_environment);
}

// The schedule runs over epochs counted by samples trained, so that it goes on through a restart at another
// world size. Fine-tuning runs one schedule over the frozen epochs and another over the rest, as fastai's
// fine_tune calls fit_one_cycle twice.
double Fit::lr_at(double epochs_trained) const {
  ScheduleOptions phase{spec_.train.schedule, peak_lr_,  spec_.train.warmup, 1.0, 1.0, spec_.train.step_every,
                        spec_.train.step_gamma};
  const auto frozen = static_cast<double>(spec_.train.freeze_epochs);
  if (epochs_trained < frozen) {
    phase.length = frozen;
    return learning_rate(phase, epochs_trained) * (plateau_ ? plateau_->multiplier() : 1.0);
  }
  phase.length = static_cast<double>(spec_.train.epochs) - frozen;
  return learning_rate(phase, epochs_trained - frozen) * (plateau_ ? plateau_->multiplier() : 1.0);
}

// The phase follows from the epoch alone, so a resumed run continues in the right one.
void Fit::enter_fine_tune_phase(std::int64_t epoch) {
  if (!fine_tune_ || body_frozen_ == (epoch < spec_.train.freeze_epochs)) return;
  body_frozen_ = epoch < spec_.train.freeze_epochs;
  model::set_body_trainable(model_, !*body_frozen_);
  synchronize_trainable(synchronizer_, placed_, spec_, communicator_);
  if (writer_ && *body_frozen_) {
    spdlog::info("fine-tuning: the head trains alone for {} epoch(s), the body frozen", spec_.train.freeze_epochs);
  } else if (writer_) {
    spdlog::info("fine-tuning: the body trains from epoch {} at lr x {:g}", epoch + 1, spec_.train.body_lr_factor);
  }
}

std::int64_t Fit::samples_done_after(const EpochSteps& epoch, std::size_t batches) const {
  const std::size_t mine = std::min(batches * batch_size_, epoch.indices.size());
  return std::min(epoch.first_sample + static_cast<std::int64_t>(mine) * communicator_.world_size(),
                  samples_.in_epoch());
}

TrainedEpoch Fit::train_epoch(std::int64_t index) {
  enter_fine_tune_phase(index);
  // An interrupted epoch goes on with the samples of its global order not trained yet.
  const std::size_t layouts_before = position_.layouts.size();
  position_.layouts = samples_.layouts(position_.samples_done, std::move(position_.layouts));
  if (writer_ && layouts_before > 0 && position_.layouts.size() > layouts_before && !data_.train_shard_sizes.empty()) {
    const data::RankLayout& now = position_.layouts.back();
    spdlog::info("the ranks now stand in {} node(s) of {}: the interrupted epoch's {} remaining samples are dealt "
                 "to them anew, each node reading its own shards", now.world_size / now.ranks_per_node,
                 now.ranks_per_node, samples_.in_epoch() - position_.samples_done);
  }
  EpochSteps epoch(index, position_.samples_done, samples_.of_rank(index, position_.samples_done, position_.layouts),
                   data_, loader_options(spec_, device_), device_);
  if (writer_) {
    epoch.progress.emplace(fmt::format("epoch {}/{}", index + 1, spec_.train.epochs), epoch.loader.num_batches(),
                           "batches");
  }
  monitor_->start_epoch(index + 1);
  epoch.start_timing();
  epoch.trained.totals = std::exchange(resumed_totals_, Totals{});  // the interrupted epoch's so far, once
  epoch.trained.lr = peak_lr_;
  try {
    while (auto next = next_batch(epoch.loader, communicator_, position_.step)) {
      const auto batch = on_device(std::move(*next), device_, uses_channels_last(spec_));
      epoch.enter(StepPart::forward_backward);
      // With accumulation, gradients are summed locally over `accumulate` batches and averaged across ranks
      // only on the last one (DDP's no_sync).
      const std::size_t position = epoch.loader.position();
      const std::int64_t micro = (static_cast<std::int64_t>(position) - 1) % accumulate_;
      const bool stepping = micro == accumulate_ - 1 || position == epoch.loader.num_batches();
      if (micro == 0) {
        const double epochs_trained = static_cast<double>(index) +
                                      static_cast<double>(samples_done_after(epoch, position - 1)) /
                                          static_cast<double>(samples_.in_epoch());
        epoch.trained.lr = lr_at(epochs_trained);
        set_learning_rate(*optimizer_, epoch.trained.lr, spec_.train.body_lr_factor);
        drop_gradients(*optimizer_);
      }
      train_batch(epoch, batch, stepping);
      if (stepping) {
        take_step(epoch);
      } else {
        epoch.enter(StepPart::data_wait);
      }
    }
  } catch (const c10::Error& error) {
    communicator_.raise_if_communication_failure(error);  // with NCCL, often seen first where losses are read
    fail(ExitCode::training, "epoch {}: {}", index + 1, error.what_without_backtrace());
  }
  if (epoch.progress) epoch.progress->close();  // the epoch line (end_epoch) is the epoch's one line
  position_.epochs_done = index + 1;
  position_.samples_done = 0;
  position_.layouts.clear();
  return epoch.trained;
}

// Forward and backward of one batch; its loss is read at the next read point.
void Fit::train_batch(EpochSteps& epoch, const data::Batch& batch, bool stepping) {
  communicator_.set_progress(position_.step, dist::Phase::forward);
  const torch::Tensor output = precision_.forward(model_, batch.inputs);
  const torch::Tensor loss = loss_of(output, batch.targets, data_.schema, spec_.train.label_smoothing);
  if (synchronizer_) synchronizer_->set_enabled(stepping);
  communicator_.set_progress(position_.step, dist::Phase::backward);
  precision_.scaled(accumulate_ > 1 ? loss / static_cast<double>(accumulate_) : loss).backward();
  epoch.losses.add(loss, batch.targets.size(0), position_.step + 1, epoch.trained.lr);
  epoch.step_samples += batch.targets.size(0);
  trace_.record(epoch.trained.index, epoch.indices, epoch.loader.position() - 1, batch_size_);
  if (epoch.progress) epoch.progress->advance();
}

// The optimizer step on the averaged gradients, then, at a read point, the losses read and the ranks'
// agreement on stopping or failing; the step's records.
void Fit::take_step(EpochSteps& epoch) {
  epoch.enter(StepPart::allreduce);
  if (synchronizer_) synchronizer_->finish();
  epoch.enter(StepPart::optimizer);
  apply_gradients(precision_, placed_.tensors, spec_.train, *optimizer_);
  ++position_.step;
  epoch.enter(StepPart::allreduce);
  const bool ends_epoch = epoch.loader.position() == epoch.loader.num_batches();
  // A periodic checkpoint is taken at a read point, where the epoch's totals it holds are up to date; the
  // step count decides alike on every rank, rank 0's clock is agreed on.
  const bool steps_due = !ends_epoch && spec_.checkpoint.every_steps > 0 &&
                         position_.step % spec_.checkpoint.every_steps == 0;
  const bool minutes_due =
      !ends_epoch && spec_.checkpoint.every_minutes > 0 &&
      Clock::now() - last_checkpoint_ >= std::chrono::minutes(spec_.checkpoint.every_minutes);
  const bool read_point = steps_due || reads_.due(position_.step, ends_epoch);
  const std::optional<std::string> diverged =
      read_point ? epoch.losses.read(epoch.trained.totals.loss_sum, epoch.trained.totals.count) : std::nullopt;
  const auto agreed = read_point ? agree_at_read_point(communicator_, reads_, position_.step, diverged.has_value(),
                                                       minutes_due)
                                 : ReadPointAgreement{false, false, false};
  if (agreed.diverged) {
    fail(ExitCode::training, "{}", diverged.value_or(fmt::format("another rank's loss became nan or inf by epoch {} "
                                                                 "step {}: lower train.lr (now {:g})",
                                                                 epoch.trained.index + 1, position_.step, epoch.trained.lr)));
  }
  if (epoch.progress && read_point) {
    const double train_loss = epoch.trained.totals.loss_sum / epoch.trained.totals.count;
    const double epoch_seconds = std::chrono::duration<double>(Clock::now() - epoch.trained.started).count();
    epoch.progress->set_note(fmt::format("loss {:.4f}", train_loss));
    epoch.progress->set_fields({{"epoch", epoch.trained.index + 1}, {"step", position_.step}, {"train_loss", train_loss},
                                {"lr", epoch.trained.lr},
                                {"images_per_s", epoch.trained.throughput.samples / std::max(1e-9, epoch_seconds)},
                                {"rank", communicator_.rank()}});
  }
  std::optional<StopCheckpoint> stop_checkpoint;  // saved because a rank was asked to stop
  if (agreed.stop) {
    stop_checkpoint = save_stop_checkpoint(epoch);
  } else if (steps_due || agreed.checkpoint_due) {
    save_periodic_checkpoint(epoch);
  }

  StepRecord record(position_.step, epoch.trained.lr, 0);  // its loss is filled in once read
  const StepTimer::Step timed = epoch.timer.end_step();
  if (epoch.gpu_timer) epoch.gpu_timer->end_step(position_.step);
  reads_.step_took(timed.seconds);
  record.seconds = timed.seconds;
  record.times = timed.times;
  for (StepLosses::Step read : epoch.losses.end_step(record, epoch.step_samples)) {
    if (epoch.gpu_timer) {  // its losses were read, so the GPU has run the step: its events have happened
      const StepTimer::Step on_gpu = epoch.gpu_timer->take(read.record.step);
      read.record.seconds = on_gpu.seconds;
      read.record.times = on_gpu.times;
    }
    if (metrics_) metrics_->write_step(read.record);
    if (sinks_) sinks_->scalars(read.record.step, step_values(read.record));
    monitor_->step_done(read.record, read.samples, communicator_.stalled_ranks());
    epoch.trained.throughput.step_seconds += read.record.seconds;
    epoch.trained.throughput.times += read.record.times;
  }
  if (sinks_ && read_point) sinks_->flush();
  epoch.trained.throughput.samples += static_cast<double>(epoch.step_samples * communicator_.world_size());
  epoch.step_samples = 0;
  if (stop_checkpoint) {
    stopped_ = true;
    communicator_.barrier();
    fail(ExitCode::interrupted, "stopped by a signal at epoch {} step {} ({} of the epoch's {} samples trained); "
         "checkpoint {} saved in {:.2f}s: a restart resumes there", epoch.trained.index + 1, position_.step,
         position_.samples_done, samples_.in_epoch(), stop_checkpoint->file.string(), stop_checkpoint->seconds);
  }
}

CheckpointState Fit::mid_epoch_state(EpochSteps& epoch) {
  position_.samples_done = samples_done_after(epoch, epoch.loader.position());
  // The epoch's totals so far go with it.
  const Totals so_far = summed_over_ranks(epoch.trained.totals, communicator_);
  epoch.enter(StepPart::checkpoint);
  communicator_.set_progress(position_.step, dist::Phase::checkpoint);
  return {position_, communicator_.world_size(), so_far.loss_sum, so_far.count};
}

StopCheckpoint Fit::save_stop_checkpoint(EpochSteps& epoch) {
  background_writes_.wait();  // a periodic checkpoint still being written is older: it goes first
  const CheckpointState state = mid_epoch_state(epoch);
  const fs::path saved = checkpoint_path(checkpoints_.directory, position_);
  double seconds = 0;
  if (checkpoints_.keeps) {
    seconds = save_timed(saved, model_, *optimizer_, state, spec_, writer_);
    monitor_->checkpoint_written(seconds);
  }
  if (writer_) publish(saved);
  last_checkpoint_ = Clock::now();
  return {saved, seconds};
}

void Fit::save_periodic_checkpoint(EpochSteps& epoch) {
  const CheckpointState state = mid_epoch_state(epoch);
  last_checkpoint_ = Clock::now();
  if (!checkpoints_.keeps) return;
  // The step pays for a copy of the state in memory; the write, the upload and the pruning go on beside training.
  const auto begun = Clock::now();
  std::string bytes = checkpoint_bytes(model_, *optimizer_, state);
  const double in_step = std::chrono::duration<double>(Clock::now() - begun).count();
  monitor_->checkpoint_written(in_step);
  const fs::path file = checkpoint_path(checkpoints_.directory, position_);
  const std::string where = fmt::format("epoch {} step {} ({} of the epoch's {} samples trained)",
                                        epoch.trained.index + 1, position_.step, position_.samples_done,
                                        samples_.in_epoch());
  background_writes_.submit(file, std::move(bytes), [this, file, where, in_step](double written_in) {
    if (writer_) publish(file);
    for (const fs::path& pruned : prune_checkpoints(checkpoints_.directory, spec_.checkpoint.keep)) {
      if (writer_ && environment_.withdraw) environment_.withdraw(pruned);
    }
    if (writer_) {
      spdlog::info("checkpoint at {} saved in {:.2f}s (the step's copy) + {:.2f}s (written beside training): {}",
                   where, in_step, written_in, file.string());
    }
  });
}

// The epoch's metrics: its training loss over all ranks and the validation's.
EpochMetrics Fit::measure(const TrainedEpoch& epoch, Predictions* predictions) {
  const Totals train = summed_over_ranks(epoch.totals, communicator_);
  EpochMetrics m;
  m.epoch = epoch.index + 1;
  m.step = position_.step;
  m.lr = epoch.lr;
  m.train_loss = train.count > 0 ? train.loss_sum / train.count : std::nan("");
  m.valid_loss = m.valid_accuracy = m.error_rate = m.top_k_accuracy = m.f1 = m.mae = m.mse = std::nan("");
  if (data_.valid && data_.valid->size() > 0) {
    communicator_.set_progress(position_.step, dist::Phase::validate);
    const Totals valid = validate(model_, data_, spec_, communicator_, precision_, device_, predictions);
    m.valid_loss = valid.loss_sum / valid.count;
    if (data_.schema.classification) {
      m.valid_accuracy = valid.correct / valid.count;
      m.error_rate = 1.0 - m.valid_accuracy;
      m.class_f1 = class_f1_scores(valid.classes, data_.schema.class_names);
      m.f1 = macro_average(m.class_f1);
    } else {
      m.mae = valid.absolute_error / valid.count;
      m.mse = m.valid_loss;  // the regression loss is the mean squared error
    }
    if (top_k_ > 0) m.top_k_accuracy = valid.top_k_correct / valid.count;
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - epoch.started).count();
  return m;
}

// The checkpoint after an epoch when checkpoint.every_epochs says so (and after the last), on every rank that
// keeps them, older ones pruned; its save time.
std::optional<double> Fit::save_epoch_checkpoint() {
  const std::int64_t done = position_.epochs_done;
  const bool due = spec_.checkpoint.every_epochs > 0 &&
                   (done % spec_.checkpoint.every_epochs == 0 || done == spec_.train.epochs);
  if (!due || !checkpoints_.keeps) return std::nullopt;
  background_writes_.wait();
  communicator_.set_progress(position_.step, dist::Phase::checkpoint);
  const fs::path saved = checkpoint_path(checkpoints_.directory, position_);
  const double seconds = save_timed(saved, model_, *optimizer_, {position_, communicator_.world_size(), 0, 0}, spec_,
                                    writer_);
  monitor_->checkpoint_written(seconds);
  if (writer_) publish(saved);
  last_checkpoint_ = Clock::now();
  for (const fs::path& pruned : prune_checkpoints(checkpoints_.directory, spec_.checkpoint.keep)) {
    if (writer_ && environment_.withdraw) environment_.withdraw(pruned);
  }
  return seconds;
}

void Fit::save_best_model(std::int64_t epoch) {
  const fs::path file = best_model_path(checkpoints_.directory, epoch);
  torch::jit::Module copy = model_.deepcopy();  // the model trains on where it is
  write_model(copy, file);
  publish(file);
  for (const fs::path& replaced : other_best_models(checkpoints_.directory, epoch)) {
    fs::remove(replaced);
    if (environment_.withdraw) environment_.withdraw(replaced);
  }
}

void Fit::end_epoch(const TrainedEpoch& epoch) {
  // The run's last epoch: what the trained model gets wrong (interpretation.json).
  const bool interpreted = epoch.index + 1 == spec_.train.epochs && interprets(data_);
  Predictions predictions;
  const EpochMetrics m = measure(epoch, interpreted ? &predictions : nullptr);
  // Every rank checks (the metrics are the same on all) and fails alike when the run does not report them.
  for (const auto& [setting, metric] : watched_metrics(spec_)) require_metric(setting, metric, m);
  const bool best_epoch = writer_ && track(m);
  if (best_epoch) save_best_model(m.epoch);
  if (interpreted) {
    communicator_.set_progress(position_.step, dist::Phase::validate);
    interpretation_ = interpret(predictions, data_.schema, spec_, {m.epoch, m.step}, communicator_);
  }
  const std::vector<std::string> bad_files = all_bad_files(*data_.bad_files, communicator_);
  if (writer_) {
    nlohmann::json extra = nlohmann::json::object();
    if (const nlohmann::json per_class = per_class_scores(interpretation_); !per_class.is_null()) {
      extra["per_class"] = per_class;
    }
    if (early_stop_verdict_) extra["early_stop"] = early_stop_record();
    if (lr_reduced_) {
      extra["reduce_lr_on_plateau"] = {{"reductions", plateau_->reductions()}, {"lr_multiplier", plateau_->multiplier()}};
    }
    metrics_->write_epoch(m, extra);
    const double per_second =
        epoch.throughput.step_seconds > 0 ? epoch.throughput.samples / epoch.throughput.step_seconds : 0;
    NamedValues values = epoch_values(m, per_second, spec::reads_images(spec_.data.format));
    for (auto& value : per_class_values(interpretation_)) values.push_back(std::move(value));
    sinks_->scalars(m.step, values);
    sinks_->flush();
    if (interpreted) write_interpretation(output_dir_ / "interpretation.json", *interpretation_);
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    write_report(output_dir_ / "report.html", {run_record(facts_, m, bad_files, elapsed), metrics_->steps(),
                                               metrics_->epochs(), spec_.train.epochs, top_k_, false,
                                               interpretation()});
  }
  // After the metrics: a checkpoint never runs ahead of the records a resumed run keeps.
  const std::optional<double> checkpoint_seconds = save_epoch_checkpoint();
  if (writer_) {
    // The epoch's one line, after its checkpoint, whose save time it gives (k8s.grace_s must cover it).
    EpochLine line = epoch_line(m, spec_.train.epochs, top_k_, epoch.throughput, spec_.data, communicator_.rank());
    if (checkpoint_seconds) {
      line.text += fmt::format("; checkpoint saved in {:.2f}s", *checkpoint_seconds);
      line.fields["checkpoint_s"] = *checkpoint_seconds;
    }
    log::info_with_fields(line.fields, line.text);
    for (const char* record : {"metrics.jsonl", "metrics.csv", "steps.jsonl", "report.html"}) {
      publish(output_dir_ / record);
    }
    if (interpreted) publish(output_dir_ / "interpretation.json");
    publish_sinks();
    if (early_stop_verdict_) spdlog::info("{}", *early_stop_verdict_);
    if (lr_reduced_) log_lr_reduction();
  }
  monitor_->epoch_done(m);
  result_.last = m;
  ++result_.epochs_run;
  stopped_early_ = agreed_by_rank_0(early_stop_verdict_.has_value(), communicator_);
  if (plateau_ && agreed_by_rank_0(lr_reduced_, communicator_) && !writer_) plateau_->reduce();
}

void Fit::log_lr_reduction() const {
  const spec::LrPlateauSpec& settings = spec_.train.reduce_lr_on_plateau;
  const MetricTracker& watched = plateau_->tracker();
  spdlog::info("reduce_lr_on_plateau: {} {:.4g} did not improve by {:g} for {} epoch{} (best {:.4g} at epoch {}): "
               "the lr is multiplied by {:g} from epoch {} on (x{:g} in all)",
               watched.metric(), watched.last()->value, settings.min_delta, settings.patience,
               settings.patience == 1 ? "" : "s", watched.best()->value, watched.best()->epoch, settings.factor,
               watched.last()->epoch + 1, plateau_->multiplier());
}

void Fit::interpret_after_early_stop() {
  // The last epoch's end interpreted its model already. Decided alike on every rank: validation is collective.
  if (!stopped_early_ || position_.epochs_done >= spec_.train.epochs || !interprets(data_)) return;
  Predictions predictions;
  communicator_.set_progress(position_.step, dist::Phase::validate);
  validate(model_, data_, spec_, communicator_, precision_, device_, &predictions);
  interpretation_ = interpret(predictions, data_.schema, spec_, {position_.epochs_done, position_.step}, communicator_);
  if (writer_ && interpretation_) {
    write_interpretation(output_dir_ / "interpretation.json", *interpretation_);
    publish(output_dir_ / "interpretation.json");
  }
}

std::optional<fs::path> Fit::kept_best_model() const {
  if (!best_ || !best_->best()) return std::nullopt;
  const fs::path best = best_model_path(checkpoints_.directory, best_->best()->epoch);
  return fs::exists(best) ? std::optional(best) : std::nullopt;
}

void Fit::write_final_model() {
  const fs::path model_file = output_dir_ / "model.pt";
  if (const std::optional<fs::path> best = kept_best_model()) {
    const fs::path temporary = temporary_sibling(model_file);
    fs::copy_file(*best, temporary, fs::copy_options::overwrite_existing);
    commit_file(temporary, model_file);
    return;
  }
  if (best_ && best_->best()) {
    spdlog::warn("checkpoint.keep_best: the model of epoch {} (the best {}) is gone from {}: model.pt is the last "
                 "epoch's", best_->best()->epoch, best_->metric(), checkpoints_.directory.string());
  }
  write_model(model_, model_file);
}

void Fit::add_tracked(nlohmann::json& record) const {
  if (kept_best_model()) {
    record["best"] = {{"metric", best_->metric()}, {"epoch", best_->best()->epoch}, {"value", best_->best()->value}};
  }
  if (early_stop_verdict_) record["early_stop"] = early_stop_record();
}

nlohmann::json Fit::early_stop_record() const {
  return {{"epoch", early_stop_->last()->epoch}, {"monitor", early_stop_->metric()},
          {"best_epoch", early_stop_->best()->epoch}, {"best_value", early_stop_->best()->value},
          {"reason", *early_stop_verdict_}};
}

std::string Fit::outcome() const {
  std::string text = early_stop_verdict_ ? *early_stop_verdict_
                                         : fmt::format("trained {} of {} epochs", position_.epochs_done, spec_.train.epochs);
  if (kept_best_model()) {
    text += fmt::format("; model.pt is epoch {}'s, the best {} ({:g})", best_->best()->epoch, best_->metric(),
                        best_->best()->value);
  }
  return text;
}

void Fit::publish_sinks() {
  if (!environment_.publish) return;
  if (!sinks_->flush_and_wait(kSinkFlushWait) && !std::exchange(sinks_behind_warned_, true)) {
    spdlog::warn("the run's records are not all written to its TensorBoard files after {}s: publishing what is "
                 "there (training goes on)", kSinkFlushWait.count());
  }
  for (const fs::path& file : sinks_->files()) publish(file);
}

FitResult Fit::finish() {
  background_writes_.wait();
  interpret_after_early_stop();
  const std::vector<std::string> bad_files = all_bad_files(*data_.bad_files, communicator_);
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  if (writer_) {
    // A resumed run that had nothing left to train reports the epoch its records end with.
    if (!metrics_->epochs().empty()) result_.last = metrics_->epochs().back();
    nlohmann::json record = run_record(facts_, result_.last, bad_files, seconds);
    add_tracked(record);
    write_report(output_dir_ / "report.html",
                 {record, metrics_->steps(), metrics_->epochs(), spec_.train.epochs, top_k_, true,
                  interpretation()});
    write_final_model();
    write_run_json(output_dir_, record);
    result_.model_file = output_dir_ / "model.pt";
    publish(output_dir_ / "report.html");
    publish(result_.model_file);
    publish(output_dir_ / "run.json");
    for (const char* artifact : {"model.pt", "report.html", "metrics.jsonl"}) sinks_->artifact(output_dir_ / artifact);
    if (interpretation_) sinks_->artifact(output_dir_ / "interpretation.json");
    sinks_->outcome(outcome());
    sinks_->run_ended(telemetry::RunEnd::finished);
    finished_ = true;
    publish_sinks();
    spdlog::info("wrote {} and {}", result_.model_file.string(), (output_dir_ / "run.json").string());
  }
  monitor_->finished();
  communicator_.barrier();
  return result_;
}

}  // namespace

FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const fs::path& output_dir, const RunOrigin& origin,
              const FitEnvironment& environment) {
  Fit run(model, data, spec, communicator, output_dir, origin, environment);
  if (run.resume()) return run.already_complete();
  run.start();
  for (std::int64_t epoch = run.first_epoch(); epoch < spec.train.epochs && !run.stopped_early(); ++epoch) {
    run.end_epoch(run.train_epoch(epoch));
  }
  return run.finish();
}

}  // namespace tp::train
