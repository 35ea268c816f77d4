// The sinks of one run, as its spec's [log] section asks for them: TensorBoard's event files in the output
// directory (log.tensorboard) and an MLflow run (log.mlflow_uri, or MLflow's own environment), behind one
// Sinks. The training loop says what the run is; which sinks that makes, and how each is set up, is decided
// here. Torch-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "telemetry/mlflow.h"
#include "telemetry/sinks.h"

namespace tp::telemetry {

struct RunSinksSettings {
  std::filesystem::path output_dir;  // TensorBoard writes into output_dir/tensorboard
  std::int64_t first_step = 0;       // the optimizer steps already taken: a resumed run's checkpoint step
  bool resumed = false;              // from a checkpoint: an MLflow run continues
  bool tensorboard = false;          // log.tensorboard
  std::string mlflow_uri;            // log.mlflow_uri; empty: MLFLOW_TRACKING_URI, or no MLflow
  std::string run_name;              // job.name
  RunSource source;
  std::filesystem::path mlflow_run_file;  // where the MLflow run's id is kept, beside the checkpoints
  std::string run_key;                    // the run identity's key and digest; empty without one
  std::string run_digest;
};

// MLflow's variables are read through `env`. Throws tp::Error(spec) for an MLflow URI it cannot speak.
std::unique_ptr<Sinks> open_run_sinks(const RunSinksSettings& settings,
                                      const std::function<const char*(const char*)>& env,
                                      std::chrono::milliseconds close_wait);

}  // namespace tp::telemetry
