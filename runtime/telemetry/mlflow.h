// A sink logging the run to an MLflow tracking server over its REST API (log.mlflow_uri, or MLflow's own
// environment): rank 0 creates or joins the experiment, starts a run tagged with the repository, commit and
// spec digest (MLflow's mlflow.source.* tags), logs the run's settings as params, the records' values as
// metrics in batches at every flush (a byte MLflow does not take in a metric's name as '_'), the finished outputs as artifacts through the server's artifact proxy,
// and the run's end as FINISHED, FAILED or KILLED. The run's id is kept in the run's checkpoint directory
// (mlflow-run.json), so that a restarted run (resumed from a checkpoint) continues exactly that MLflow run; a
// checkpoint without it (from an older trainpoint) continues the run tagged with the same run key. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/sinks.h"

namespace tp::http {
class Handle;
struct Request;
struct Response;
}  // namespace tp::http

namespace tp::telemetry {

// Where a run's code came from: the MLflow run is tagged with it (MLflow's mlflow.source.* tags).
struct RunSource {
  std::string repo;
  std::string commit;
  std::string ref;
  std::string spec_name;  // the spec's path in the repository
};

struct MlflowSettings {
  std::string tracking_uri;     // http:// or https://, without a trailing slash
  std::string experiment_name;  // empty: the server's default experiment (id 0)
  std::string run_id;           // join this run (MLFLOW_RUN_ID)
  std::string run_name;
  std::string token;     // MLFLOW_TRACKING_TOKEN: a bearer token
  std::string username;  // MLFLOW_TRACKING_USERNAME and _PASSWORD: HTTP basic authentication
  std::string password;
  std::string ca_bundle;  // MLFLOW_TRACKING_SERVER_CERT_PATH
  RunSource source;
  std::string run_key;     // tagged trainpoint.run_key: a resumed run without run_file finds its MLflow run by it
  std::string run_digest;  // tagged trainpoint.run_digest: the run identity's digest
  bool resumed = false;   // resumed from a checkpoint: join the run of run_file, else of the same run key
  // The run's mlflow-run.json (in its checkpoint directory): the MLflow run it logs to, written once known,
  // read when resumed. Empty: none.
  std::filesystem::path run_file;
};

// `spec_uri` (log.mlflow_uri) or MLFLOW_TRACKING_URI, and MLflow's other variables, read through `env`;
// nullopt when neither names a server. Throws tp::Error(spec) for a URI that is not http(s):// (file stores
// and Databricks are not spoken).
std::optional<MlflowSettings> mlflow_settings(const std::string& spec_uri,
                                              const std::function<const char*(const char*)>& env);

class MlflowSink : public Sink {
 public:
  explicit MlflowSink(MlflowSettings settings);
  ~MlflowSink() override;

  std::string name() const override { return "MLflow (" + settings_.tracking_uri + ")"; }
  void run_started(const HParams& hparams, double wall_time) override;
  void scalars(std::int64_t step, double wall_time, const Scalars& values) override;
  void artifact(const std::filesystem::path& file) override;
  // The run's tag trainpoint.outcome.
  void outcome(const std::string& text, double wall_time) override;
  void run_ended(RunEnd end, double wall_time) override;
  void flush() override;
  // mlflow-run.json, once written: published with the checkpoints.
  std::vector<std::filesystem::path> files() const override;

 private:
  struct Metric {
    std::string key;
    double value;
    std::int64_t timestamp_ms;
    std::int64_t step;
  };
  http::Response perform(const http::Request& request, const std::string& what);
  std::string call(const std::string& method, const std::string& path, const std::string& body);
  std::string experiment_id();
  std::optional<std::string> run_of_key(const std::string& experiment);
  // Writes run_file (temporary, then renamed).
  void record_run(const std::string& experiment) const;

  MlflowSettings settings_;
  std::unique_ptr<http::Handle> handle_;
  std::string run_id_;
  std::string artifact_path_;  // below the artifact proxy: <experiment>/<run>/artifacts
  std::vector<Metric> pending_;
};

}  // namespace tp::telemetry
