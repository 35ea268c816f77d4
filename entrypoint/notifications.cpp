#include "notifications.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/url.h"
#include "dist/topology.h"
#include "storage/output.h"
#include "train/metrics.h"

namespace tp::notifications {
namespace {

// An epoch's metrics as metrics.jsonl names them, those the run reported (a regression has no accuracy).
std::vector<std::pair<std::string, double>> reported_metrics(const train::EpochMetrics& epoch) {
  std::vector<std::pair<std::string, double>> reported{{"epoch", static_cast<double>(epoch.epoch)}};
  for (const auto& [name, value] : {std::pair{"train_loss", epoch.train_loss}, {"valid_loss", epoch.valid_loss},
                                    {"accuracy", epoch.valid_accuracy}, {"error_rate", epoch.error_rate},
                                    {"top_k_accuracy", epoch.top_k_accuracy}, {"f1", epoch.f1}, {"mae", epoch.mae},
                                    {"mse", epoch.mse}}) {
    if (!std::isnan(value)) reported.emplace_back(name, value);
  }
  return reported;
}

// What a notification says the job trains: "train.toml of REPO at COMMIT" (the ref until it is resolved).
std::string trained_source(const cli::Options& options, const std::string& commit) {
  return fmt::format("{} of {} at {}", options.spec, redacted_url(options.repo), commit.empty() ? options.ref : commit);
}

}  // namespace

void describe_run(const cli::Options& options, const std::string& commit, const spec::LoadedSpec* loaded,
                  RunDescription& described) {
  described.outcome.source = trained_source(options, commit);
  if (loaded == nullptr) {
    described.outcome.job = "the job of " + options.spec;  // until the spec has loaded
    return;
  }
  const spec::Spec& spec = loaded->spec;
  described.outcome.job = spec.job.name;
  described.outcome.outputs = spec.job.output;
  described.notify = spec.notify;
  try {
    if (spec.job.command.empty()) described.output_dir = storage::OutputLocation(spec, options.workdir).local_dir();
  } catch (const Error&) {
    // S3 settings that do not resolve: the run's own checks say so; the notification has no metrics
  }
}

std::vector<telemetry::Webhook> webhooks_for(const spec::NotifySpec& notify, telemetry::JobEvent event) {
  if (std::find(notify.on.begin(), notify.on.end(), telemetry::event_name(event)) == notify.on.end()) return {};
  return telemetry::resolve_webhooks(notify.webhooks, notify.format, dist::process_environment);
}

std::unique_ptr<telemetry::StallNotifier> watch_stalls(const cli::Options& options, const std::string& commit,
                                                       const spec::Spec& spec, std::function<int()> stalled_ranks) {
  std::vector<telemetry::Webhook> webhooks = webhooks_for(spec.notify, telemetry::JobEvent::stalled);
  if (webhooks.empty()) return nullptr;
  telemetry::JobOutcome job;
  job.job = spec.job.name;
  job.source = trained_source(options, commit);
  job.outputs = spec.job.output;
  return std::make_unique<telemetry::StallNotifier>(
      std::move(webhooks), std::move(job), std::move(stalled_ranks),
      std::chrono::seconds(spec.dist.heartbeat_s), std::chrono::seconds(spec.dist.stall_s));
}

int run_and_notify(bool speaks_for_job, const std::function<int(RunDescription&)>& run) {
  RunDescription described;
  if (!speaks_for_job) return run(described);
  telemetry::JobOutcome& outcome = described.outcome;
  const auto tell = [&] {
    try {
      telemetry::notify(webhooks_for(described.notify, outcome.event), outcome);
    } catch (const Error&) {
      // a malformed webhook: the run has already failed saying so
    }
  };
  const auto failed = [&](ExitCode code, std::string_view message) {
    if (is_retryable(code)) return;
    outcome.event = telemetry::JobEvent::failed;
    outcome.exit_code = static_cast<int>(code);
    outcome.exit_class = std::string(exit_class_name(code));
    outcome.error = std::string(message);
    tell();
  };
  int code = 0;
  try {
    code = run(described);
  } catch (const Error& error) {
    failed(error.code(), error.message());
    throw;
  }
  if (code != 0) {  // a node's launcher returns its workers' exit, which they logged
    failed(static_cast<ExitCode>(code), fmt::format("a worker exited with code {} (its log says why)", code));
    return code;
  }
  outcome.event = telemetry::JobEvent::finished;
  if (described.output_dir) {
    const std::vector<train::EpochMetrics> epochs = train::read_epoch_metrics(*described.output_dir);
    if (!epochs.empty()) outcome.metrics = reported_metrics(epochs.back());
  }
  tell();
  return 0;
}

}  // namespace tp::notifications
