// Kubeflow Trainer's TrainJob progress (Trainer v2.2, KEP-2779): when the TrainJobStatus feature is on,
// the controller gives every trainer container KUBEFLOW_TRAINER_SERVER_URL (the job's status endpoint),
// KUBEFLOW_TRAINER_SERVER_CA_CERT (the CA file of its TLS certificate) and KUBEFLOW_TRAINER_SERVER_TOKEN
// (a projected service account token file, renewed by the kubelet). A POST of
// {"trainerStatus": {progressPercentage, estimatedRemainingSeconds, metrics, lastUpdatedTime}} with the
// token as a bearer token sets the TrainJob's status.trainerStatus, which `kubectl get trainjob` shows.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tp::telemetry {

struct TrainerStatusEndpoint {
  std::string url;
  std::filesystem::path ca_cert;
  std::filesystem::path token_file;
};

// The endpoint the controller injected, or nothing when the variables are not all set (not a TrainJob,
// or the feature is off; a partial set is logged once).
std::optional<TrainerStatusEndpoint> trainer_status_endpoint(
    const std::function<std::optional<std::string>(const std::string&)>& environment);

struct TrainerProgress {
  int percent = 0;  // 0-100
  std::optional<std::int64_t> remaining_seconds;
  std::vector<std::pair<std::string, std::string>> metrics;  // name (at most 64 characters), value as text
};

// The request body, stamped `now` (lastUpdatedTime, RFC 3339 UTC).
std::string trainer_status_body(const TrainerProgress& progress, std::time_t now);

// Posts the latest progress from its own thread, at most once per `interval`, so that training never
// waits for the status server. A failing server never fails training: the first failure is logged as a
// warning, later ones only at debug level.
class TrainerStatusReporter {
 public:
  TrainerStatusReporter(TrainerStatusEndpoint endpoint, std::chrono::milliseconds interval);
  // Posts the last progress not yet sent (each request is bounded by a 10 s timeout), then stops.
  ~TrainerStatusReporter();
  TrainerStatusReporter(const TrainerStatusReporter&) = delete;
  TrainerStatusReporter& operator=(const TrainerStatusReporter&) = delete;

  // Replaces the progress waiting to be posted.
  void report(TrainerProgress progress);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tp::telemetry
