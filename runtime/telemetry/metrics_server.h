// Prometheus /metrics for a training rank: training updates a snapshot of its values, a server thread
// renders it in the Prometheus text format (version 0.0.4). Serving never blocks training: an update
// only copies the values under a mutex that a request holds just as long.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace tp::telemetry {

// What one rank reports. Unset values (before the first step, or without CUDA) are left out.
struct TrainingGauges {
  std::int64_t step = 0;   // optimizer steps taken
  std::int64_t epoch = 0;  // the epoch in progress, 1-based
  std::int64_t samples_total = 0;  // samples this rank trained on in this process
  std::optional<double> train_loss;  // the last step's mean loss on this rank
  std::optional<double> learning_rate;
  std::optional<double> last_step_timestamp_seconds;  // Unix time the last step ended
  double data_wait_seconds_total = 0;
  double forward_backward_seconds_total = 0;
  double allreduce_exposed_seconds_total = 0;  // gradient averaging not hidden behind backward
  double optimizer_seconds_total = 0;
  std::optional<double> checkpoint_seconds;  // how long the last checkpoint took to write
  std::int64_t stalled_ranks = 0;            // ranks this rank's watchdog sees as stalled
  std::optional<double> gpu_memory_allocated_bytes;
  std::optional<double> gpu_memory_reserved_bytes;
};

// The text format: a HELP and TYPE line per metric, every sample labelled
// {trainpoint_job="<job>",rank="<rank>"}. The label is not `job`, which Prometheus sets on every
// target itself (it would rename ours to exported_job).
std::string render_prometheus(const TrainingGauges& gauges, const std::string& job, int rank);

class MetricsServer {
 public:
  // Listens on `address`:`port` (port 0: any free port) and serves GET /metrics from its own threads.
  // Throws tp::Error (ExitCode::usage) naming the port when it cannot listen.
  MetricsServer(const std::string& address, int port, std::string job, int rank);
  ~MetricsServer();  // stops serving
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void update(const TrainingGauges& gauges);
  int port() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tp::telemetry
