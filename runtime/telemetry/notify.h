// A job's end told to webhooks ([notify]): Slack's incoming webhooks, Microsoft Teams' workflows, or any receiver
// of JSON. The pod of rank 0 posts once when the run finished, or failed for good (an exit of the permanent
// class: a retryable failure restarts the pod, which tells nothing yet); rank 0 also when ranks stall
// (StallNotifier). A Slack or Teams URL is a secret (whoever has it may post to the channel): it comes from the
// environment, which render-job's pods fill from k8s.secret's Secret, and messages name only its host. A
// notification carries no secret: the job, what it trains, the outcome with the one-line error or the last
// epoch's metrics, and where the outputs are. A server that fails is retried for a bounded time, then one
// warning: it never changes the job's exit. Torch-free.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tp::telemetry {

using Environment = std::function<std::optional<std::string>(const std::string&)>;

enum class WebhookFormat { json, slack, teams };

struct Webhook {
  std::string url;
  WebhookFormat format = WebhookFormat::json;
  // "https://hooks.slack.com": what messages show of the URL, without its path and any password (the secrets).
  std::string shown() const;
};

// The webhooks `entries` name (notify.webhooks): http(s) URLs, and "env:NAME" for the URL in the variable NAME
// of `environment` (skipped when it is unset or empty), each in `format` (notify.format: json, slack, teams, or
// auto: Slack's for hooks.slack.com, Teams' for *.webhook.office.com and *.logic.azure.com, JSON otherwise).
// Throws tp::Error (usage) naming the entry, never a URL, when one is not an http(s) URL.
std::vector<Webhook> resolve_webhooks(const std::vector<std::string>& entries, const std::string& format,
                                      const Environment& environment);

enum class JobEvent { finished, failed, stalled };

struct JobOutcome {
  std::string job;     // job.name
  std::string source;  // what it trains: "train.toml of https://git.example.org/team/moons.git at 3f1c2a9"
  JobEvent event = JobEvent::failed;
  int exit_code = 0;
  std::string exit_class;  // "spec error" (docs/exit-codes.md)
  std::string error;       // the failure's one line, or what stalled
  std::vector<std::pair<std::string, double>> metrics;  // the last epoch's, as metrics.jsonl names them
  std::string outputs;                                   // job.output
};

// "finished", "failed", "stalled": notify.on's words.
const char* event_name(JobEvent event);

// The request body in the webhook's format: {"text": ...} for Slack, an Adaptive Card message for Teams, and
// for JSON {"event", "job", "source", "exit_code", "exit_class", "error", "metrics", "outputs", "report", "text"}.
std::string notification_body(const JobOutcome& outcome, WebhookFormat format);

// Posts the outcome to each webhook in its format; a failure is one warning each, never an exception.
void notify(const std::vector<Webhook>& webhooks, const JobOutcome& outcome);

// Posts `body`; an answer of 429, 5xx or none is retried with backoff until `within` has passed. Returns why
// it was not delivered (naming only the webhook's host), or nullopt.
std::optional<std::string> post_notification(const Webhook& webhook, const std::string& body,
                                             std::chrono::seconds within);

// Rank 0's watch over stalled ranks: every `interval`, from its own thread, it reads `stalled_ranks` (the
// heartbeat's count of ranks that made no progress for dist.stall_s) and posts a "stalled" notification when
// the count becomes non-zero: once per stall, again only after every rank moved on. A failed post is one
// warning. The training thread never waits for it.
class StallNotifier {
 public:
  StallNotifier(std::vector<Webhook> webhooks, JobOutcome job, std::function<int()> stalled_ranks,
                std::chrono::milliseconds interval, std::chrono::seconds stall);
  // Stops the watch; a post in flight is finished first (it gives up within 15 s).
  ~StallNotifier();
  StallNotifier(const StallNotifier&) = delete;
  StallNotifier& operator=(const StallNotifier&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tp::telemetry
