// What the platform sees of a run while it trains: Prometheus /metrics from local rank 0 of each node
// (job.metrics_port), Kubeflow Trainer's TrainJob progress from rank 0 (when the controller injected its
// endpoint), and the epoch log line with throughput and where the step time went.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "spec/spec.h"
#include "train/metrics.h"
#include "train/step_time.h"

namespace tp::telemetry {
class MetricsServer;
class TrainerStatusReporter;
}  // namespace tp::telemetry

namespace tp::train {

// What one epoch's steps did on this rank, for its log line.
struct EpochThroughput {
  double samples = 0;        // trained by all ranks in the epoch
  double step_seconds = 0;   // this rank's steps, end to end
  StepTimes times;           // the same, by part
};

// The epoch's line ("epoch 2/5: train_loss ... lr ... (12.3s); 2150 images/s, data wait 4%"), with a hint
// when the data wait passes 10% of the step time, and the same values as fields for --log-format json.
struct EpochLine {
  std::string text;
  nlohmann::json fields;
};
EpochLine epoch_line(const EpochMetrics& metrics, std::int64_t total_epochs, std::int64_t top_k,
                     const EpochThroughput& throughput, const spec::DataSpec& data, int rank);

struct MonitorSettings {
  std::string job;
  int rank = 0;
  int local_rank = 0;
  int metrics_port = 0;               // 0: no /metrics
  std::string metrics_address = "0.0.0.0";
  std::int64_t total_steps = 0;        // of the whole run
  std::int64_t total_epochs = 0;
  std::int64_t first_step = 0;         // where this process starts (a resumed run)
  std::optional<int> cuda_device;      // GPU memory is reported for it
  std::chrono::milliseconds status_interval{10'000};  // at most one progress post per interval
};

class RunMonitor {
 public:
  // Serves /metrics on local rank 0 when settings.metrics_port is set (a port it cannot listen on is a
  // warning: monitoring never stops training) and reports progress on rank 0 when `environment` has
  // Kubeflow Trainer's variables.
  RunMonitor(MonitorSettings settings,
             const std::function<std::optional<std::string>(const std::string&)>& environment);
  ~RunMonitor();
  RunMonitor(const RunMonitor&) = delete;
  RunMonitor& operator=(const RunMonitor&) = delete;

  void start_epoch(std::int64_t epoch);  // 1-based
  // `samples`: this rank's samples in the step; `stalled_ranks`: what this rank's watchdog sees.
  void step_done(const StepRecord& step, std::int64_t samples, int stalled_ranks);
  void checkpoint_written(double seconds);
  void epoch_done(const EpochMetrics& metrics);
  // Training ended: progress 100%.
  void finished();

 private:
  void publish();

  MonitorSettings settings_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::unique_ptr<telemetry::MetricsServer> server_;
  std::unique_ptr<telemetry::TrainerStatusReporter> status_;
  struct Values;
  std::unique_ptr<Values> values_;
};

}  // namespace tp::train
