#include "train/trainer.h"

#include <torch/script.h>
#include <torch/torch.h>

#if TRAINPOINT_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "common/files.h"
#include "common/log.h"
#include "common/signals.h"
#include "common/time.h"
#include "data/loader.h"
#include "dist/c10d_compat.h"
#include "dist/gradient_sync.h"
#include "dist/topology.h"
#include "model/model.h"
#include "storage/run_identity.h"
#include "train/checkpoint.h"
#include "train/monitor.h"
#include "train/precision.h"
#include "train/report.h"
#include "train/schedule.h"
#include "train/step_losses.h"
#include "train/training_step.h"

namespace tp::train {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// What the ranks agree on at a read point (train/step_losses.h), in one all-reduce: whether any was asked to
// stop (SIGTERM), so that all stop at the same step; whether any read a loss that is not finite, so that all
// fail alike; and the next read point.
struct ReadPointAgreement {
  bool stop;
  bool diverged;
};
ReadPointAgreement agree_at_read_point(dist::Communicator& communicator, ReadPoints& reads, std::int64_t step,
                                       bool diverged) {
  const std::vector<std::int64_t> sums =
      dist::sum_over_ranks(communicator, std::vector<std::int64_t>{stop_requested() ? 1 : 0, diverged ? 1 : 0,
                                                                     reads.propose()});
  reads.agreed(step, sums[2], communicator.world_size());
  return {sums[0] > 0, sums[1] > 0};
}

// Correct predictions in a batch: whole samples for classification, the mean of the per-label
// decisions of each sample for multi-label.
double correct_in(const torch::Tensor& output, const torch::Tensor& target, const data::Schema& schema) {
  if (schema.multi_label) return output.gt(0).eq(target.gt(0.5)).to(torch::kDouble).mean(1).sum().item<double>();
  return output.argmax(1).eq(target).sum().item<double>();
}

// Whether top-k accuracy is reported: single-label classification with more than k classes.
bool reports_top_k(const data::Schema& schema, std::int64_t k) {
  return schema.classification && !schema.multi_label && schema.num_outputs > k;
}

// Samples whose target is among the k highest scores.
double top_k_correct_in(const torch::Tensor& output, const torch::Tensor& target, std::int64_t k) {
  return std::get<1>(output.topk(k, 1)).eq(target.unsqueeze(1)).any(1).sum().item<double>();
}

// The next batch, with the phase published while it loads.
std::optional<data::Batch> next_batch(data::Loader& loader, dist::Communicator& communicator, std::int64_t step) {
  communicator.set_progress(step, dist::Phase::data);
  return loader.next();
}

struct Totals {
  double loss_sum = 0;
  double correct = 0;
  double top_k_correct = 0;
  double absolute_error = 0;  // regression
  double count = 0;
};

// Sums per-rank totals over all ranks.
Totals all_ranks(const Totals& mine, dist::Communicator& communicator) {
  const std::vector<double> sums = dist::sum_over_ranks(
      communicator,
      std::vector<double>{mine.loss_sum, mine.correct, mine.top_k_correct, mine.absolute_error, mine.count});
  return {sums[0], sums[1], sums[2], sums[3], sums[4]};
}

// Validation on this rank's disjoint share (no padding, so every sample counts once overall).
Totals validate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                dist::Communicator& communicator, const Precision& precision, c10::Device device) {
  const std::size_t first = data.rank_share ? 0 : static_cast<std::size_t>(communicator.rank());
  const std::size_t stride = data.rank_share ? 1 : static_cast<std::size_t>(communicator.world_size());
  Totals totals;
  std::vector<std::size_t> mine;
  for (std::size_t i = first; i < data.valid->size(); i += stride) mine.push_back(i);
  torch::NoGradGuard no_grad;
  model.eval();
  data::Loader loader(data.valid, mine, 0, loader_options(spec, device));
  while (auto next = loader.next()) {
    const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
    const torch::Tensor output = precision.forward(model, batch.inputs);
    const double n = static_cast<double>(batch.targets.size(0));
    totals.loss_sum += loss_of(output, batch.targets, data.schema).item<double>() * n;
    if (data.schema.classification) totals.correct += correct_in(output, batch.targets, data.schema);
    if (reports_top_k(data.schema, spec.train.top_k)) {
      totals.top_k_correct += top_k_correct_in(output, batch.targets, spec.train.top_k);
    }
    if (!data.schema.classification) {
      totals.absolute_error += (output.reshape({-1}) - batch.targets.to(torch::kFloat)).abs().sum().item<double>();
    }
    totals.count += n;
  }
  model.train();
  return all_ranks(totals, communicator);
}

// Every rank's bad files, sorted and without duplicates.
std::vector<std::string> all_bad_files(const data::BadFiles& bad_files, dist::Communicator& communicator) {
  const std::vector<std::string> gathered = dist::all_gather_strings(communicator, bad_files.files());
  const std::set<std::string> all(gathered.begin(), gathered.end());
  return {all.begin(), all.end()};
}

// On the CPU, so that the model loads anywhere (Python's torch.jit.load puts tensors where they were).
void write_model(torch::jit::Module& model, const fs::path& output_dir) {
  const fs::path model_file = output_dir / "model.pt";
  const fs::path temporary = temporary_sibling(model_file);
  model.to(torch::kCPU);
  model.eval();
  model.save(temporary.string());
  commit_file(temporary, model_file);
}

// TRAINPOINT_TRACE_SAMPLES=DIR: each rank appends "<epoch> <sample>" for every sample it trains to
// DIR/samples-rank-<rank>.txt, to show which samples a run and its restarts trained (docs/distributed.md).
class SampleTrace {
 public:
  explicit SampleTrace(int rank) {
    const char* directory = std::getenv("TRAINPOINT_TRACE_SAMPLES");
    if (directory == nullptr || *directory == '\0') return;
    fs::create_directories(directory);
    out_.open(fs::path(directory) / fmt::format("samples-rank-{}.txt", rank), std::ios::app);
  }
  // The samples of batch `batch` of `indices`.
  void record(std::int64_t epoch, const std::vector<std::size_t>& indices, std::size_t batch, std::size_t batch_size) {
    if (!out_.is_open()) return;
    for (std::size_t i = batch * batch_size; i < std::min(indices.size(), (batch + 1) * batch_size); ++i) {
      out_ << epoch << ' ' << indices[i] << '\n';
    }
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// Where this rank keeps checkpoints: the run's directory, checkpoints/<run key>/, in its node's output.
struct RunCheckpoints {
  fs::path directory;
  bool keeps = false;  // rank 0, and a node's own copy (FitEnvironment::node_copy)
};

// Rank 0 names the run; every rank that keeps checkpoints records its identity beside them, and rank 0
// publishes it (an s3:// output: a new pod compares its run with it before any rendezvous).
RunCheckpoints run_checkpoints_of(const FitEnvironment& environment, const fs::path& output_dir,
                                  dist::Communicator& communicator) {
  const fs::path root = environment.checkpoints_root.empty() ? output_dir / "checkpoints" : environment.checkpoints_root;
  const std::string document = dist::broadcast_bytes(
      communicator, environment.identity ? storage::identity_json(*environment.identity).dump() : "", 0);
  RunCheckpoints checkpoints{root, communicator.rank() == 0 || environment.node_copy};
  if (document.empty()) return checkpoints;
  const storage::RunIdentity identity = storage::identity_from_json(nlohmann::json::parse(document), "rank 0's run");
  checkpoints.directory = storage::run_checkpoints(root, identity);
  if (!checkpoints.keeps) return checkpoints;
  const auto recorded = storage::record_identity(checkpoints.directory, identity);
  if (recorded && communicator.rank() == 0 && environment.publish) environment.publish(*recorded);
  return checkpoints;
}

// checkpoint.resume = "never": this run's checkpoints from an earlier start are deleted, so that the new
// ones are not mixed with them; other runs' are left alone.
void forget_checkpoints(const fs::path& directory, const FitEnvironment& environment, bool writer) {
  const std::vector<fs::path> removed = prune_checkpoints(directory, 0);
  if (removed.empty()) return;
  spdlog::warn("checkpoint.resume = \"never\": deleted {} checkpoint(s) of an earlier start of this run in {}",
               removed.size(), directory.string());
  for (const fs::path& file : removed) {
    if (writer && environment.withdraw) environment.withdraw(file);
  }
}

// The newest checkpoint any rank holds (by step), the same on every rank: ranks that lack it receive it
// from the lowest rank that has it, and those that keep checkpoints store it. Nothing when no rank has one.
std::optional<Checkpoint> agree_on_checkpoint(std::optional<Checkpoint> mine, dist::Communicator& communicator,
                                              const RunCheckpoints& checkpoints) {
  if (communicator.world_size() == 1) return mine;
  const std::vector<std::int64_t> steps =
      dist::all_gather_values(communicator, mine ? mine->state.position.step + 1 : 0);  // 0: none
  const std::int64_t newest = *std::max_element(steps.begin(), steps.end());
  if (newest == 0) return std::nullopt;
  if (std::count(steps.begin(), steps.end(), newest) == communicator.world_size()) {
    return mine;  // every rank has it: nothing to send
  }
  const int holder = static_cast<int>(std::find(steps.begin(), steps.end(), newest) - steps.begin());
  const bool lacking = !mine || mine->state.position.step + 1 != newest;
  std::string bytes = dist::broadcast_bytes(communicator, communicator.rank() == holder ? mine->bytes : "", holder);
  if (!lacking) return mine;
  Checkpoint received = read_checkpoint(std::move(bytes), fmt::format("rank {}'s checkpoint at step {}", holder, newest - 1));
  spdlog::warn("rank {}: {} the newest checkpoint (step {}); received it from rank {}", communicator.rank(),
               mine ? fmt::format("has only step {}, not", mine->state.position.step) : std::string("has no checkpoint, not"),
               newest - 1, holder);
  if (checkpoints.keeps) {
    received.file = checkpoint_path(checkpoints.directory, received.state.position);
    fs::create_directories(checkpoints.directory);
    write_file_atomic(received.file, received.bytes);
  }
  return received;
}

// Rank 0's answer to a question only it can answer, on every rank.
bool agreed_by_rank_0(bool answer, dist::Communicator& communicator) {
  return dist::any_rank(communicator, communicator.rank() == 0 && answer);
}

// Saves a checkpoint, logs how long it took (a preempted pod has k8s.grace_s to write one) and returns the seconds.
double save_timed(const fs::path& file, const torch::jit::Module& model, const torch::optim::Optimizer& optimizer,
                  const CheckpointState& state, const spec::Spec& spec, bool writer) {
  const auto begun = Clock::now();
  save_checkpoint(file, model, optimizer, state);
  const double seconds = std::chrono::duration<double>(Clock::now() - begun).count();
  const double megabytes = static_cast<double>(fs::file_size(file)) / (1 << 20);
  if (seconds > static_cast<double>(spec.k8s.grace_s) / 2) {
    spdlog::warn("checkpoint {} ({:.1f} MiB) took {:.1f}s to save, more than half of k8s.grace_s = {}: a "
                 "preempted pod may be killed before its checkpoint is complete; raise k8s.grace_s",
                 file.string(), megabytes, seconds, spec.k8s.grace_s);
  } else if (writer) {
    // At debug: the epoch line gives the save time; a slow save warns above.
    spdlog::debug("checkpoint {} saved ({:.1f} MiB in {:.2f}s)", file.string(), megabytes, seconds);
  }
  return seconds;
}

// On a GPU, waits for the work this rank queued on its compute stream, so that the step timer charges it to
// the part that queued it. The gradients' all-reduce runs on its own stream and is not waited for here.
void wait_for_device(c10::Device device) {
#if TRAINPOINT_WITH_CUDA
  if (device.is_cuda()) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
#else
  (void)device;
#endif
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

}  // namespace

FitResult fit(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
              dist::Communicator& communicator, const fs::path& output_dir, const RunOrigin& origin,
              const FitEnvironment& environment) {
  const auto published = [&](const fs::path& file) {
    if (environment.publish) environment.publish(file);
  };
  const c10::Device device = environment.device;
  const auto started = Clock::now();
  const RunFacts facts{origin, spec, data, communicator.world_size(), utc_timestamp()};
  const bool writer = communicator.rank() == 0;
  const RunCheckpoints checkpoints = run_checkpoints_of(environment, output_dir, communicator);
  Precision precision(spec.train.precision, device);
  if (writer) fs::create_directories(output_dir);

  Parameters placed = place_model(model, spec, device);
  std::vector<torch::Tensor>& parameters = placed.tensors;
  const std::vector<std::string>& names = placed.names;
  // Fine-tuning: the body and the head in two optimizer groups, so the body can have its own lr.
  const bool fine_tune = spec.train.freeze_epochs > 0;
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (fine_tune) {
    const std::vector<std::string> head = model::head_parameter_names(model);
    std::vector<torch::Tensor> body_parameters, head_parameters;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const bool in_head = std::find(head.begin(), head.end(), names[i]) != head.end();
      (in_head ? head_parameters : body_parameters).push_back(parameters[i]);
    }
    groups.emplace_back(body_parameters);
    groups.emplace_back(head_parameters);
  } else {
    groups.emplace_back(parameters);
  }
  auto optimizer = make_optimizer(spec.train, groups);
  model.train();

  // The run's data: which samples each epoch has, split across the ranks.
  const EpochSamples samples(data, spec, communicator);
  const std::int64_t accumulate = spec.train.accumulate;
  const auto batch_size = static_cast<std::size_t>(spec.train.batch_size);
  const std::int64_t global_batch = spec.train.batch_size * communicator.world_size() * accumulate;
  // The linear scaling rule (Goyal et al. 2017): the peak lr grows with the global batch, with warmup.
  const double global_batch_factor = static_cast<double>(communicator.world_size() * accumulate);
  const double peak_lr = spec.train.lr_scaling == "linear" ? spec.train.lr * global_batch_factor : spec.train.lr;

  TrainingPosition position;
  Totals resumed_totals;  // the interrupted epoch's, on rank 0 (the epoch's totals are summed over ranks)
  std::optional<Checkpoint> resumed;
  if (spec.checkpoint.resume == "never") {
    if (checkpoints.keeps) forget_checkpoints(checkpoints.directory, environment, writer);
  } else {
    resumed = agree_on_checkpoint(newest_checkpoint(checkpoints.directory), communicator, checkpoints);
  }
  if (resumed) {
    apply_checkpoint(*resumed, model, *optimizer);
    position = resumed->state.position;
    if (writer) {
      resumed_totals.loss_sum = resumed->state.train_loss_sum;
      resumed_totals.count = resumed->state.train_count;
    }
  }

  FitResult result;
  // A run that already ran its epochs and wrote its final outputs is complete: it is not done again.
  if (position.epochs_done >= spec.train.epochs && agreed_by_rank_0(environment.final_outputs_present, communicator)) {
    result.already_complete = true;
    if (writer) {
      const std::vector<EpochMetrics> epochs = read_epoch_metrics(output_dir);
      if (!epochs.empty()) result.last = epochs.back();
      spdlog::info("the run is already complete: {} epochs trained (train.epochs = {}, last checkpoint {}); "
                   "nothing is trained or rewritten", position.epochs_done, spec.train.epochs, resumed->file.string());
    }
    communicator.barrier();
    return result;
  }
  if (resumed && writer) {
    spdlog::info("resumed from {} after epoch {}{} (step {})", resumed->file.string(), position.epochs_done,
                 position.samples_done > 0 ? fmt::format(" and {} samples of epoch {}", position.samples_done,
                                                         position.epochs_done + 1)
                                           : "",
                 position.step);
    if (resumed->state.world_size != communicator.world_size()) {
      const double old_factor = static_cast<double>(resumed->state.world_size * accumulate);
      spdlog::info("the world size changed from {} to {}: global batch {} -> {}{}; {}", resumed->state.world_size,
                   communicator.world_size(), spec.train.batch_size * resumed->state.world_size * accumulate,
                   global_batch,
                   spec.train.lr_scaling == "linear"
                       ? fmt::format(", peak lr {:g} -> {:g} (linear scaling)", spec.train.lr * old_factor, peak_lr)
                       : "",
                   position.samples_done > 0 ? "the interrupted epoch's remaining samples are split over the new "
                                               "ranks, each trained once; the schedule goes on by samples seen"
                                             : "the schedule goes on by samples seen");
    }
  }
  // The final outputs of an earlier run go first: only a run that finishes writes them again.
  if (writer) {
    fs::remove(output_dir / "run.json");
    fs::remove(output_dir / "model.pt");
  }

  start_from_rank_0(model, parameters, communicator);  // after rank 0 resumed
  // Built again whenever fine-tuning freezes or unfreezes the body (at the same epoch on every rank).
  std::optional<dist::GradientSynchronizer> synchronizer;
  if (!fine_tune) synchronize_trainable(synchronizer, placed, spec, communicator);

  const std::int64_t batches_per_epoch =
      static_cast<std::int64_t>((samples.per_rank(0) + batch_size - 1) / batch_size);
  const std::int64_t steps_per_epoch = (batches_per_epoch + accumulate - 1) / accumulate;
  // The schedule runs over epochs counted by samples trained, so that it goes on through a restart at
  // another world size. Fine-tuning runs one schedule over the frozen epochs and another over the rest, as
  // fastai's fine_tune calls fit_one_cycle twice.
  const ScheduleOptions schedule{spec.train.schedule, peak_lr, spec.train.warmup, 1.0, 1.0,
                                 spec.train.step_every, spec.train.step_gamma};
  const auto frozen = static_cast<double>(spec.train.freeze_epochs);
  auto lr_at = [&](double epochs) {
    ScheduleOptions phase = schedule;
    if (epochs < frozen) {
      phase.length = frozen;
      return learning_rate(phase, epochs);
    }
    phase.length = static_cast<double>(spec.train.epochs) - frozen;
    return learning_rate(phase, epochs - frozen);
  };
  if (writer) {
    spdlog::info("training {} samples ({} per rank, {} steps per epoch), validating on {}; world size {}; global "
                 "batch {}; peak lr {:g}{}",
                 data.train->size(), samples.per_rank(0), steps_per_epoch, data.valid ? data.valid->size() : 0,
                 communicator.world_size(), global_batch, peak_lr,
                 spec.train.lr_scaling == "linear" ? fmt::format(" (train.lr {:g} x {:g}, linear scaling)", spec.train.lr,
                                                                 global_batch_factor)
                                                   : "");
  }

  std::unique_ptr<MetricsLog> metrics;
  if (writer) metrics = std::make_unique<MetricsLog>(output_dir, position.epochs_done, position.step);
  const std::int64_t top_k = reports_top_k(data.schema, spec.train.top_k) ? spec.train.top_k : 0;
  SampleTrace trace(communicator.rank());
  install_stop_handlers();
  RunMonitor monitor(monitor_settings(spec, communicator, environment, steps_per_epoch * spec.train.epochs, position.step),
                     dist::process_environment);

  ReadPoints reads;
  std::optional<bool> body_frozen;
  for (std::int64_t epoch = position.epochs_done; epoch < spec.train.epochs; ++epoch) {
    // The phase follows from the epoch alone, so a resumed run continues in the right one.
    if (fine_tune && body_frozen != (epoch < spec.train.freeze_epochs)) {
      body_frozen = epoch < spec.train.freeze_epochs;
      model::set_body_trainable(model, !*body_frozen);
      synchronize_trainable(synchronizer, placed, spec, communicator);
      if (writer && *body_frozen) {
        spdlog::info("fine-tuning: the head trains alone for {} epoch(s), the body frozen", spec.train.freeze_epochs);
      } else if (writer) {
        spdlog::info("fine-tuning: the body trains from epoch {} at lr x {:g}", epoch + 1, spec.train.body_lr_factor);
      }
    }
    const auto epoch_started = Clock::now();
    // An interrupted epoch goes on with the samples of its global order not trained yet.
    const std::int64_t first_sample = position.samples_done;
    const std::vector<std::size_t> indices = samples.of_rank(epoch, first_sample);
    data::Loader loader(data.train, indices, epoch, loader_options(spec, device));
    // Samples of the epoch's global order trained once this rank has trained `batches` batches.
    const auto samples_done_after = [&](std::size_t batches) {
      const std::size_t mine = std::min(batches * batch_size, indices.size());
      return std::min(first_sample + static_cast<std::int64_t>(mine) * communicator.world_size(), samples.in_epoch());
    };
    // Rank 0 speaks for the job; the other ranks log only warnings and errors.
    std::optional<log::Progress> progress;
    if (writer) {
      progress.emplace(fmt::format("epoch {}/{}", epoch + 1, spec.train.epochs), loader.num_batches(), "batches");
    }
    monitor.start_epoch(epoch + 1);
    StepTimer timer;
    timer.start();
    EpochThroughput throughput;
    std::int64_t step_samples = 0;  // this rank's, in this step
    Totals train_totals = epoch == position.epochs_done ? resumed_totals : Totals{};
    double lr = peak_lr;
    StepLosses losses(epoch);
    try {
      while (auto next = next_batch(loader, communicator, position.step)) {
        const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
        timer.enter(StepPart::forward_backward);
        // With accumulation, gradients are summed locally over `accumulate` batches and averaged
        // across ranks only on the last one (DDP's no_sync).
        const std::int64_t micro = (static_cast<std::int64_t>(loader.position()) - 1) % accumulate;
        const bool stepping = micro == accumulate - 1 || loader.position() == loader.num_batches();
        if (micro == 0) {
          const double epochs_trained = static_cast<double>(epoch) +
                                        static_cast<double>(samples_done_after(loader.position() - 1)) /
                                            static_cast<double>(samples.in_epoch());
          lr = lr_at(epochs_trained);
          set_learning_rate(*optimizer, lr, spec.train.body_lr_factor);
          optimizer->zero_grad();
        }
        communicator.set_progress(position.step, dist::Phase::forward);
        const torch::Tensor output = precision.forward(model, batch.inputs);
        const torch::Tensor loss = loss_of(output, batch.targets, data.schema, spec.train.label_smoothing);
        if (synchronizer) synchronizer->set_enabled(stepping);
        communicator.set_progress(position.step, dist::Phase::backward);
        precision.scaled(accumulate > 1 ? loss / static_cast<double>(accumulate) : loss).backward();
        losses.add(loss, batch.targets.size(0), position.step + 1, lr);  // read at the next read point
        step_samples += batch.targets.size(0);
        trace.record(epoch, indices, loader.position() - 1, batch_size);
        if (progress) progress->advance();
        if (!stepping) {
          timer.enter(StepPart::data_wait);
          continue;
        }
        wait_for_device(device);
        timer.enter(StepPart::allreduce);
        if (synchronizer) synchronizer->finish();
        timer.enter(StepPart::optimizer);
        apply_gradients(precision, parameters, spec.train, *optimizer);
        wait_for_device(device);
        ++position.step;
        timer.enter(StepPart::allreduce);
        std::optional<fs::path> stop_checkpoint;  // saved because a rank was asked to stop
        double stop_save_seconds = 0;
        const bool read_point = reads.due(position.step, loader.position() == loader.num_batches());
        const std::optional<std::string> diverged =
            read_point ? losses.read(train_totals.loss_sum, train_totals.count) : std::nullopt;
        const auto agreed = read_point ? agree_at_read_point(communicator, reads, position.step, diverged.has_value())
                                       : ReadPointAgreement{false, false};
        if (agreed.diverged) {
          fail(ExitCode::training, "{}", diverged.value_or(fmt::format("another rank's loss became nan or inf by "
                                                                       "epoch {} step {}: lower train.lr (now {:g})",
                                                                       epoch + 1, position.step, lr)));
        }
        if (progress && read_point) {
          progress->set_note(fmt::format("loss {:.4f}", train_totals.loss_sum / train_totals.count));
          const double epoch_seconds = std::chrono::duration<double>(Clock::now() - epoch_started).count();
          progress->set_fields({{"epoch", epoch + 1}, {"step", position.step},
                                {"train_loss", train_totals.loss_sum / train_totals.count}, {"lr", lr},
                                {"images_per_s", throughput.samples / std::max(1e-9, epoch_seconds)},
                                {"rank", communicator.rank()}});
        }
        if (agreed.stop) {
          // One checkpoint at this step on every rank that keeps them; the epoch's totals so far go with it.
          position.samples_done = samples_done_after(loader.position());
          const Totals so_far = all_ranks(train_totals, communicator);
          timer.enter(StepPart::checkpoint);
          communicator.set_progress(position.step, dist::Phase::checkpoint);
          const fs::path saved = checkpoint_path(checkpoints.directory, position);
          if (checkpoints.keeps) {
            stop_save_seconds = save_timed(saved, model, *optimizer,
                                           {position, communicator.world_size(), so_far.loss_sum, so_far.count}, spec,
                                           writer);
            monitor.checkpoint_written(stop_save_seconds);
          }
          if (writer) published(saved);
          stop_checkpoint = saved;
        }
        StepRecord record(position.step, lr, 0);  // its loss is filled in once read
        const StepTimer::Step timed = timer.end_step();
        reads.step_took(timed.seconds);
        record.seconds = timed.seconds;
        record.times = timed.times;
        for (const StepLosses::Step& read : losses.end_step(record, step_samples)) {
          if (metrics) metrics->write_step(read.record);
          monitor.step_done(read.record, read.samples, communicator.stalled_ranks());
        }
        throughput.samples += static_cast<double>(step_samples * communicator.world_size());
        throughput.step_seconds += timed.seconds;
        throughput.times += timed.times;
        step_samples = 0;
        if (stop_checkpoint) {
          const fs::path& saved = *stop_checkpoint;
          communicator.barrier();
          fail(ExitCode::interrupted, "stopped by a signal at epoch {} step {} ({} of the epoch's {} samples "
               "trained); checkpoint {} saved in {:.2f}s: a restart resumes there", epoch + 1, position.step,
               position.samples_done, samples.in_epoch(), saved.string(), stop_save_seconds);
        }
      }
    } catch (const c10::Error& error) {
      communicator.raise_if_communication_failure(error);  // with NCCL, often seen first where losses are read
      fail(ExitCode::training, "epoch {}: {}", epoch + 1, error.what_without_backtrace());
    }
    if (progress) progress->close();  // the epoch line below is the epoch's one line
    position.epochs_done = epoch + 1;
    position.samples_done = 0;

    const Totals train = all_ranks(train_totals, communicator);
    EpochMetrics m;
    m.epoch = epoch + 1;
    m.step = position.step;
    m.lr = lr;
    m.train_loss = train.count > 0 ? train.loss_sum / train.count : std::nan("");
    m.valid_loss = m.valid_accuracy = m.error_rate = m.top_k_accuracy = m.mae = m.mse = std::nan("");
    if (data.valid && data.valid->size() > 0) {
      communicator.set_progress(position.step, dist::Phase::validate);
      const Totals valid = validate(model, data, spec, communicator, precision, device);
      m.valid_loss = valid.loss_sum / valid.count;
      if (data.schema.classification) {
        m.valid_accuracy = valid.correct / valid.count;
        m.error_rate = 1.0 - m.valid_accuracy;
      } else {
        m.mae = valid.absolute_error / valid.count;
        m.mse = m.valid_loss;  // the regression loss is the mean squared error
      }
      if (top_k > 0) m.top_k_accuracy = valid.top_k_correct / valid.count;
    }
    m.seconds = std::chrono::duration<double>(Clock::now() - epoch_started).count();
    const std::vector<std::string> bad_files = all_bad_files(*data.bad_files, communicator);
    if (writer) {
      metrics->write_epoch(m);
      const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
      write_report(output_dir / "report.html",
                   {run_record(facts, m, bad_files, elapsed), metrics->steps(), metrics->epochs(), spec.train.epochs,
                    top_k, false});
    }
    // After the metrics: a checkpoint never runs ahead of the records a resumed run keeps.
    const bool due = spec.checkpoint.every_epochs > 0 &&
                     (m.epoch % spec.checkpoint.every_epochs == 0 || m.epoch == spec.train.epochs);
    std::optional<double> checkpoint_seconds;
    if (due && checkpoints.keeps) {
      communicator.set_progress(position.step, dist::Phase::checkpoint);
      const fs::path saved = checkpoint_path(checkpoints.directory, position);
      checkpoint_seconds = save_timed(saved, model, *optimizer, {position, communicator.world_size(), 0, 0}, spec, writer);
      monitor.checkpoint_written(*checkpoint_seconds);
      if (writer) published(saved);
      for (const fs::path& pruned : prune_checkpoints(checkpoints.directory, spec.checkpoint.keep)) {
        if (writer && environment.withdraw) environment.withdraw(pruned);
      }
    }
    if (writer) {
      // The epoch's one line, after its checkpoint, whose save time it gives (k8s.grace_s must cover it).
      EpochLine line = epoch_line(m, spec.train.epochs, top_k, throughput, spec.data, communicator.rank());
      if (checkpoint_seconds) {
        line.text += fmt::format("; checkpoint saved in {:.2f}s", *checkpoint_seconds);
        line.fields["checkpoint_s"] = *checkpoint_seconds;
      }
      log::info_with_fields(line.fields, line.text);
      for (const char* record : {"metrics.jsonl", "metrics.csv", "steps.jsonl", "report.html"}) {
        published(output_dir / record);
      }
    }
    monitor.epoch_done(m);
    result.last = m;
    ++result.epochs_run;
  }

  const std::vector<std::string> bad_files = all_bad_files(*data.bad_files, communicator);
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (writer) {
    // A resumed run that had nothing left to train reports the epoch its records end with.
    if (!metrics->epochs().empty()) result.last = metrics->epochs().back();
    const nlohmann::json record = run_record(facts, result.last, bad_files, seconds);
    write_report(output_dir / "report.html",
                 {record, metrics->steps(), metrics->epochs(), spec.train.epochs, top_k, true});
    write_model(model, output_dir);
    write_run_json(output_dir, record);
    result.model_file = output_dir / "model.pt";
    published(output_dir / "report.html");
    published(result.model_file);
    published(output_dir / "run.json");
    spdlog::info("wrote {} and {}", result.model_file.string(), (output_dir / "run.json").string());
  }
  monitor.finished();
  communicator.barrier();
  return result;
}

}  // namespace tp::train
