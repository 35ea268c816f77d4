#include "telemetry/mlflow.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/retry.h"
#include "common/url.h"
#include "http/transfer.h"

namespace tp::telemetry {
namespace {

using nlohmann::json;

constexpr std::size_t kMetricsPerBatch = 1000;  // MLflow's limits of one runs/log-batch
constexpr std::size_t kParamsPerBatch = 100;
constexpr std::size_t kParamValueLength = 6000;

std::int64_t milliseconds(double seconds) {
  return static_cast<std::int64_t>(std::llround(seconds * 1000));
}

std::string param_text(const HParam& value) {
  if (const auto* flag = std::get_if<bool>(&value)) return *flag ? "true" : "false";
  if (const auto* number = std::get_if<double>(&value)) return fmt::format("{}", *number);
  return std::get<std::string>(value).substr(0, kParamValueLength);
}

// A metric's name as MLflow takes it: only letters, digits, '_', '-', '.', ' ', ':' and '/' (a batch with
// another byte fails whole), so any other byte (of a class name in interpretation/f1/<class>) becomes '_'.
std::string metric_key(std::string name) {
  for (char& c : name) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                         c == '-' || c == '.' || c == ' ' || c == ':' || c == '/';
    if (!allowed) c = '_';
  }
  return name;
}

// The tags a new run is created with: where its code came from, and the run identity's key and digest when
// the run has one.
json run_tags(const MlflowSettings& settings) {
  const std::pair<const char*, std::string> source[] = {{"mlflow.source.type", "JOB"},
                                                        {"mlflow.source.name", settings.source.repo},
                                                        {"mlflow.source.git.repoURL", settings.source.repo},
                                                        {"mlflow.source.git.commit", settings.source.commit},
                                                        {"mlflow.source.git.branch", settings.source.ref},
                                                        {"trainpoint.spec", settings.source.spec_name}};
  json tags = json::array();
  for (const auto& [key, value] : source) tags.push_back({{"key", key}, {"value", value}});
  if (!settings.run_key.empty()) tags.push_back({{"key", "trainpoint.run_key"}, {"value", settings.run_key}});
  if (!settings.run_digest.empty()) {
    tags.push_back({{"key", "trainpoint.run_digest"}, {"value", settings.run_digest}});
  }
  return tags;
}

// What mlflow-run.json holds.
struct RunRecord {
  std::string run_id;
  std::string tracking_uri;
  std::string experiment_id;
};

// nullopt when `file` is empty or not there.
std::optional<RunRecord> read_run_record(const std::filesystem::path& file) {
  std::error_code error;
  if (file.empty() || !std::filesystem::exists(file, error)) return std::nullopt;
  const json recorded = json::parse(read_file(file, ExitCode::output), nullptr, /*allow_exceptions=*/false);
  if (!recorded.is_object() || !recorded.value("run_id", json()).is_string() ||
      !recorded.value("tracking_uri", json()).is_string() || !recorded.value("experiment_id", json()).is_string()) {
    fail(ExitCode::output, "{}: not an MLflow run record (run_id, tracking_uri and experiment_id)", file.string());
  }
  return RunRecord{recorded["run_id"], recorded["tracking_uri"], recorded["experiment_id"]};
}

}  // namespace

std::optional<MlflowSettings> mlflow_settings(const std::string& spec_uri,
                                              const std::function<const char*(const char*)>& env) {
  auto variable = [&](const char* name) {
    const char* value = env(name);
    return std::string(value ? value : "");
  };
  MlflowSettings settings;
  settings.tracking_uri = spec_uri.empty() ? variable("MLFLOW_TRACKING_URI") : spec_uri;
  if (settings.tracking_uri.empty()) return std::nullopt;
  const std::string from = spec_uri.empty() ? "MLFLOW_TRACKING_URI" : "log.mlflow_uri";
  if (settings.tracking_uri.rfind("http://", 0) != 0 && settings.tracking_uri.rfind("https://", 0) != 0) {
    fail(ExitCode::spec, "{} = \"{}\": trainpoint speaks to an MLflow tracking server over HTTP: give its "
         "http:// or https:// URL (file stores and Databricks are not supported)", from, settings.tracking_uri);
  }
  while (!settings.tracking_uri.empty() && settings.tracking_uri.back() == '/') settings.tracking_uri.pop_back();
  settings.experiment_name = variable("MLFLOW_EXPERIMENT_NAME");
  settings.run_id = variable("MLFLOW_RUN_ID");
  settings.token = variable("MLFLOW_TRACKING_TOKEN");
  settings.username = variable("MLFLOW_TRACKING_USERNAME");
  settings.password = variable("MLFLOW_TRACKING_PASSWORD");
  settings.ca_bundle = variable("MLFLOW_TRACKING_SERVER_CERT_PATH");
  return settings;
}

MlflowSink::MlflowSink(MlflowSettings settings) : settings_(std::move(settings)) {
  http::Settings http_settings;
  http_settings.ca_bundle = settings_.ca_bundle;
  http_settings.connect_timeout = std::chrono::seconds(5);
  handle_ = std::make_unique<http::Handle>(http_settings);
}

MlflowSink::~MlflowSink() = default;

// `request` until the server answers 200, through the one retry policy (common/retry.h): a transport failure
// or a transient status (429, 5xx) is tried again, so that a flaky tracking server costs retries, not the
// run's history; the last failure, or any other answer, throws, naming `what` and the server's error (never a
// credential). A retried call changes nothing twice on the server: a metric logged again at the same step and
// time is the same point to MLflow, and a run's end the same end.
http::Response MlflowSink::perform(const http::Request& request, const std::string& what) {
  http::Response response;
  retry(RetryPolicy{}, [&]() -> std::optional<std::string> {
    response = handle_->perform(request);
    if (response.transport != http::Transport::ok) {
      const std::string cause = fmt::format("{}: {}", what, response.transport_error);
      if (response.transport == http::Transport::transient) return cause;
      fail(ExitCode::network, "{}", cause);
    }
    if (response.status == 200) return std::nullopt;
    const std::string cause = fmt::format("{}: HTTP {}: {}", what, response.status, response.body.substr(0, 300));
    if (http::transient_status(response.status)) return cause;
    fail(ExitCode::network, "{}", cause);
  });
  return response;
}

// One REST call.
std::string MlflowSink::call(const std::string& method, const std::string& path, const std::string& body) {
  http::Request request;
  request.method = method;
  request.url = settings_.tracking_uri + path;
  request.headers = {{"Content-Type", "application/json"}};
  if (!settings_.token.empty()) request.headers.emplace_back("Authorization", "Bearer " + settings_.token);
  if (!settings_.username.empty()) request.basic_auth = std::make_pair(settings_.username, settings_.password);
  if (method != "GET") {
    request.body = http::text_body(body);
    request.body_size = body.size();
  }
  return perform(request, method + " " + path.substr(0, path.find('?'))).body;
}

std::string MlflowSink::experiment_id() {
  if (settings_.experiment_name.empty()) return "0";  // MLflow's Default experiment
  const std::string by_name = "/api/2.0/mlflow/experiments/get-by-name?experiment_name=" +
                              percent_encode(settings_.experiment_name, false);
  try {
    return json::parse(call("GET", by_name, ""))["experiment"]["experiment_id"].get<std::string>();
  } catch (const Error&) {
    // Not there yet (404), or another error that creating it will name.
  }
  try {
    return json::parse(call("POST", "/api/2.0/mlflow/experiments/create",
                            json{{"name", settings_.experiment_name}}.dump()))["experiment_id"].get<std::string>();
  } catch (const Error&) {
    // Created meanwhile by another job: read it again.
    return json::parse(call("GET", by_name, ""))["experiment"]["experiment_id"].get<std::string>();
  }
}

std::optional<std::string> MlflowSink::run_of_key(const std::string& experiment) {
  const json found = json::parse(call(
      "POST", "/api/2.0/mlflow/runs/search",
      json{{"experiment_ids", {experiment}},
           {"filter", "tags.`trainpoint.run_key` = '" + settings_.run_key + "'"},
           {"order_by", {"attributes.start_time DESC"}},
           {"max_results", 1}}
          .dump()));
  if (!found.contains("runs") || found["runs"].empty()) return std::nullopt;
  return found["runs"][0]["info"]["run_id"].get<std::string>();
}

void MlflowSink::record_run(const std::string& experiment) const {
  if (settings_.run_file.empty()) return;
  std::filesystem::create_directories(settings_.run_file.parent_path());
  write_file_atomic(settings_.run_file,
                    json{{"run_id", run_id_}, {"tracking_uri", settings_.tracking_uri}, {"experiment_id", experiment}}
                            .dump(2) + "\n");
}

void MlflowSink::run_started(const HParams& hparams, double wall_time) {
  run_id_ = settings_.run_id;
  std::string experiment;
  bool continued = false;  // the run of an earlier start of this run: its params and tags are there
  if (run_id_.empty()) {
    experiment = experiment_id();
    if (settings_.resumed) {
      if (const auto recorded = read_run_record(settings_.run_file)) {
        // Not when it is on another server or in another experiment (settings changed since).
        if (recorded->tracking_uri == settings_.tracking_uri && recorded->experiment_id == experiment) {
          run_id_ = recorded->run_id;
        }
      } else if (!settings_.run_key.empty()) {
        // A checkpoint of an older trainpoint, which did not keep the run's id.
        if (auto found = run_of_key(experiment)) run_id_ = *found;
      }
      continued = !run_id_.empty();
    }
  } else {
    continued = settings_.resumed;  // MLFLOW_RUN_ID, given again to the restart
  }
  json tags = run_tags(settings_);
  json info;
  if (!run_id_.empty()) {
    info = json::parse(call("GET", "/api/2.0/mlflow/runs/get?run_id=" + percent_encode(run_id_, false), ""))["run"]
                      ["info"];
    call("POST", "/api/2.0/mlflow/runs/update", json{{"run_id", run_id_}, {"status", "RUNNING"}}.dump());
    experiment = info.value("experiment_id", experiment);
  } else {
    json create{{"experiment_id", experiment}, {"start_time", milliseconds(wall_time)}, {"tags", tags}};
    if (!settings_.run_name.empty()) create["run_name"] = settings_.run_name;
    info = json::parse(call("POST", "/api/2.0/mlflow/runs/create", create.dump()))["run"]["info"];
    run_id_ = info["run_id"].get<std::string>();
    tags = json::array();  // given with the run
  }
  record_run(experiment);
  const std::string artifact_uri = info.value("artifact_uri", "");
  const std::string proxied = "mlflow-artifacts:/";
  if (artifact_uri.rfind(proxied, 0) == 0) artifact_path_ = artifact_uri.substr(proxied.size());
  while (!artifact_path_.empty() && artifact_path_.front() == '/') artifact_path_.erase(0, 1);
  // A continued run has its params already (a param cannot change in MLflow, and train.epochs may have); a
  // run given by MLFLOW_RUN_ID gets them and the tags now.
  if (continued) return;
  json params = json::array();
  for (const auto& [key, value] : hparams) {
    params.push_back({{"key", key}, {"value", param_text(value)}});
    if (params.size() == kParamsPerBatch) {
      call("POST", "/api/2.0/mlflow/runs/log-batch", json{{"run_id", run_id_}, {"params", params}}.dump());
      params = json::array();
    }
  }
  if (!params.empty() || !tags.empty()) {
    call("POST", "/api/2.0/mlflow/runs/log-batch",
         json{{"run_id", run_id_}, {"params", params}, {"tags", tags}}.dump());
  }
}

void MlflowSink::scalars(std::int64_t step, double wall_time, const Scalars& values) {
  for (const auto& [key, value] : values) {
    if (std::isnan(value)) continue;  // a metric that does not apply
    pending_.push_back({metric_key(key), value, milliseconds(wall_time), step});
  }
}

void MlflowSink::flush() {
  if (run_id_.empty()) return;
  while (!pending_.empty()) {
    const std::size_t count = std::min(pending_.size(), kMetricsPerBatch);
    json metrics = json::array();
    for (std::size_t i = 0; i < count; ++i) {
      const Metric& m = pending_[i];
      metrics.push_back({{"key", m.key}, {"value", m.value}, {"timestamp", m.timestamp_ms}, {"step", m.step}});
    }
    call("POST", "/api/2.0/mlflow/runs/log-batch", json{{"run_id", run_id_}, {"metrics", metrics}}.dump());
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(count));
  }
}

void MlflowSink::artifact(const std::filesystem::path& file) {
  if (run_id_.empty()) return;
  if (artifact_path_.empty()) {
    fail(ExitCode::network, "the run's artifact store is not the server's artifact proxy (mlflow-artifacts:/): "
         "{} is not uploaded; start the server with --serve-artifacts", file.filename().string());
  }
  auto in = std::make_shared<std::ifstream>(file, std::ios::binary);
  if (!*in) fail(ExitCode::output, "cannot read {}", file.string());
  const std::uint64_t size = std::filesystem::file_size(file);
  http::Request request;
  request.method = "PUT";
  request.url = settings_.tracking_uri + "/api/2.0/mlflow-artifacts/artifacts/" +
                percent_encode(artifact_path_, true) + "/" + percent_encode(file.filename().string(), false);
  request.headers = {{"Content-Type", "application/octet-stream"}};
  if (!settings_.token.empty()) request.headers.emplace_back("Authorization", "Bearer " + settings_.token);
  if (!settings_.username.empty()) request.basic_auth = std::make_pair(settings_.username, settings_.password);
  request.body_size = size;
  request.body = [in](char* buffer, std::size_t want, std::uint64_t offset) -> std::optional<std::size_t> {
    in->clear();
    in->seekg(static_cast<std::streamoff>(offset));
    in->read(buffer, static_cast<std::streamsize>(want));
    if (in->bad()) return std::nullopt;
    return static_cast<std::size_t>(in->gcount());
  };
  perform(request, "uploading " + file.filename().string());
}

std::vector<std::filesystem::path> MlflowSink::files() const {
  if (settings_.run_file.empty()) return {};
  return {settings_.run_file};  // Sinks::files leaves it out until it exists
}

void MlflowSink::outcome(const std::string& text, double wall_time) {
  (void)wall_time;
  if (run_id_.empty()) return;
  call("POST", "/api/2.0/mlflow/runs/set-tag",
       json{{"run_id", run_id_}, {"key", "trainpoint.outcome"}, {"value", text}}.dump());
}

void MlflowSink::run_ended(RunEnd end, double wall_time) {
  if (run_id_.empty()) return;
  flush();
  const char* status = end == RunEnd::finished ? "FINISHED" : end == RunEnd::failed ? "FAILED" : "KILLED";
  call("POST", "/api/2.0/mlflow/runs/update",
       json{{"run_id", run_id_}, {"status", status}, {"end_time", milliseconds(wall_time)}}.dump());
}

}  // namespace tp::telemetry
