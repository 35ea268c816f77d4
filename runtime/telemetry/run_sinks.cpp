#include "telemetry/run_sinks.h"

#include <utility>
#include <vector>

#include "telemetry/tensorboard.h"

namespace tp::telemetry {
namespace {

// At most this many records wait for the sinks' thread; more are dropped (sinks.h).
constexpr std::size_t kQueuedRecords = 4096;

}  // namespace

std::unique_ptr<Sinks> open_run_sinks(const RunSinksSettings& settings,
                                      const std::function<const char*(const char*)>& env,
                                      std::chrono::milliseconds close_wait) {
  std::vector<std::unique_ptr<Sink>> sinks;
  if (settings.tensorboard) {
    sinks.push_back(std::make_unique<TensorBoardSink>(settings.output_dir / "tensorboard", settings.first_step));
  }
  if (auto mlflow = mlflow_settings(settings.mlflow_uri, env)) {
    mlflow->run_name = settings.run_name;
    mlflow->resumed = settings.resumed;
    mlflow->run_file = settings.mlflow_run_file;
    mlflow->source = settings.source;
    mlflow->run_key = settings.run_key;
    mlflow->run_digest = settings.run_digest;
    sinks.push_back(std::make_unique<MlflowSink>(std::move(*mlflow)));
  }
  return std::make_unique<Sinks>(std::move(sinks), kQueuedRecords, close_wait);
}

}  // namespace tp::telemetry
