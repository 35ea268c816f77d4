#include "train/monitor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <ctime>

#include "common/error.h"
#include "telemetry/metrics_server.h"
#include "telemetry/trainer_status.h"

#if TRAINPOINT_WITH_CUDA
#include "dist/c10d_compat.h"
#endif

namespace tp::train {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kDataWaitHint = 0.10;  // a data wait above this share of the step time gets a hint

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A value as the status API takes it: text of at most 64 characters.
std::string status_value(double value) {
  return fmt::format("{:.6g}", value);
}

}  // namespace

EpochLine epoch_line(const EpochMetrics& m, std::int64_t total_epochs, std::int64_t top_k,
                     const EpochThroughput& throughput, const spec::DataSpec& data, int rank) {
  const std::string validation = describe_validation(m, top_k);
  const double per_second = throughput.step_seconds > 0 ? throughput.samples / throughput.step_seconds : 0;
  const double wait_share =
      throughput.step_seconds > 0 ? throughput.times[StepPart::data_wait] / throughput.step_seconds : 0;
  const char* unit = spec::reads_images(data.format) ? "images/s" : "samples/s";
  std::string text = fmt::format("epoch {}/{}: train_loss {:.4f}{}{} lr {:.3g} ({:.1f}s); {:.0f} {}, data wait {:.0f}% "
                                 "of step time",
                                 m.epoch, total_epochs, m.train_loss, validation.empty() ? "" : " ", validation, m.lr,
                                 m.seconds, per_second, unit, 100 * wait_share);
  if (wait_share > kDataWaitHint) {
    text += fmt::format(": training waits for data; more loader threads (data.workers, now {})", data.workers);
    if (data.staging == spec::Staging::stream && spec::reads_images(data.format)) {
      text += " or data staged on the node before training (data.staging = \"all\" instead of \"stream\")";
    }
    text += " may help";
  }
  nlohmann::json fields{{"epoch", m.epoch},
                        {"epochs", total_epochs},
                        {"step", m.step},
                        {"train_loss", json_number(m.train_loss)},
                        {"valid_loss", json_number(m.valid_loss)},
                        {"accuracy", json_number(m.valid_accuracy)},
                        {"lr", m.lr},
                        {"seconds", m.seconds},
                        {"images_per_s", per_second},
                        {"data_wait_share", wait_share},
                        {"rank", rank}};
  if (!std::isnan(m.mae)) fields["mae"] = m.mae;
  if (!std::isnan(m.top_k_accuracy)) fields["top_k_accuracy"] = m.top_k_accuracy;
  return {text, fields};
}

struct RunMonitor::Values {
  telemetry::TrainingGauges gauges;
  std::optional<EpochMetrics> last_epoch;
  bool finished = false;
};

RunMonitor::RunMonitor(MonitorSettings settings,
                       const std::function<std::optional<std::string>(const std::string&)>& environment)
    : settings_(std::move(settings)), values_(std::make_unique<Values>()) {
  values_->gauges.step = settings_.first_step;
  if (settings_.metrics_port > 0 && settings_.local_rank == 0) {
    try {
      server_ = std::make_unique<telemetry::MetricsServer>(settings_.metrics_address, settings_.metrics_port,
                                                           settings_.job, settings_.rank);
      spdlog::info("serving Prometheus metrics at http://{}:{}/metrics", settings_.metrics_address,
                   settings_.metrics_port);
    } catch (const Error& error) {
      spdlog::warn("{}; training goes on without /metrics", error.what());
    }
  }
  if (settings_.rank == 0) {
    if (auto endpoint = telemetry::trainer_status_endpoint(environment)) {
      spdlog::info("reporting progress to Kubeflow Trainer at {}", endpoint->url);
      status_ = std::make_unique<telemetry::TrainerStatusReporter>(std::move(*endpoint), settings_.status_interval);
    }
  }
  publish();
}

RunMonitor::~RunMonitor() = default;

void RunMonitor::start_epoch(std::int64_t epoch) {
  values_->gauges.epoch = epoch;
  publish();
}

void RunMonitor::step_done(const StepRecord& step, std::int64_t samples, int stalled_ranks) {
  telemetry::TrainingGauges& g = values_->gauges;
  g.step = step.step;
  g.samples_total += samples;
  g.train_loss = step.train_loss;
  g.learning_rate = step.lr;
  g.last_step_timestamp_seconds = unix_now();
  g.data_wait_seconds_total += step.times[StepPart::data_wait];
  g.forward_backward_seconds_total += step.times[StepPart::forward_backward];
  g.allreduce_exposed_seconds_total += step.times[StepPart::allreduce];
  g.optimizer_seconds_total += step.times[StepPart::optimizer];
  g.stalled_ranks = stalled_ranks;
#if TRAINPOINT_WITH_CUDA
  if (settings_.cuda_device) {
    const dist::compat::GpuMemory memory = dist::compat::gpu_memory(*settings_.cuda_device);
    g.gpu_memory_allocated_bytes = static_cast<double>(memory.allocated_bytes);
    g.gpu_memory_reserved_bytes = static_cast<double>(memory.reserved_bytes);
  }
#endif
  publish();
}

void RunMonitor::checkpoint_written(double seconds) {
  values_->gauges.checkpoint_seconds = seconds;
  publish();
}

void RunMonitor::epoch_done(const EpochMetrics& metrics) {
  values_->last_epoch = metrics;
  publish();
}

void RunMonitor::finished() {
  values_->finished = true;
  publish();
}

void RunMonitor::publish() {
  const Values& v = *values_;
  if (server_) server_->update(v.gauges);
  if (!status_) return;
  telemetry::TrainerProgress progress;
  const std::int64_t step = v.gauges.step;
  const std::int64_t total = std::max<std::int64_t>(1, settings_.total_steps);
  // 100% only once training has ended: the last step is followed by validation and the final outputs.
  progress.percent = v.finished ? 100 : static_cast<int>(std::min<std::int64_t>(99, 100 * step / total));
  const std::int64_t done_here = step - settings_.first_step;
  if (v.finished) {
    progress.remaining_seconds = 0;
  } else if (done_here > 0) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    progress.remaining_seconds = static_cast<std::int64_t>(std::ceil(elapsed / done_here * (total - step)));
  }
  auto add = [&](const char* name, double value) {
    if (std::isfinite(value)) progress.metrics.emplace_back(name, status_value(value));
  };
  if (v.gauges.train_loss) add("loss", *v.gauges.train_loss);
  if (v.gauges.learning_rate) add("lr", *v.gauges.learning_rate);
  if (v.last_epoch) {
    add("eval_loss", v.last_epoch->valid_loss);
    add("accuracy", v.last_epoch->valid_accuracy);
    add("top_k_accuracy", v.last_epoch->top_k_accuracy);
    add("mae", v.last_epoch->mae);
  }
  progress.metrics.emplace_back("currentEpoch", std::to_string(std::max<std::int64_t>(1, v.gauges.epoch)));
  progress.metrics.emplace_back("totalEpochs", std::to_string(settings_.total_epochs));
  progress.metrics.emplace_back("step", std::to_string(step));
  status_->report(std::move(progress));
}

}  // namespace tp::train
