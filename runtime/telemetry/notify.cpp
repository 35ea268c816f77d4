#include "telemetry/notify.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "common/error.h"
#include "common/retry.h"
#include "http/transfer.h"

namespace tp::telemetry {
namespace {

// An http(s) URL: its scheme, user information (a secret too), host and port.
const std::regex kHttpUrl(R"(^(https?)://([^/?#@]+@)?([^/?#:]+)(:[0-9]+)?([/?#].*)?$)", std::regex::icase);

std::string host_of(const std::string& url) {
  std::smatch match;
  return std::regex_match(url, match, kHttpUrl) ? match[3].str() : "";
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

WebhookFormat format_for_host(const std::string& host) {
  if (host == "hooks.slack.com") return WebhookFormat::slack;
  if (ends_with(host, ".webhook.office.com") || ends_with(host, ".logic.azure.com")) return WebhookFormat::teams;
  return WebhookFormat::json;
}

// One line a person reads: "moons-ddp finished: valid_loss 0.41, accuracy 0.87. Outputs: s3://models/moons".
std::string headline(const JobOutcome& outcome) {
  std::string text;
  if (outcome.event == JobEvent::stalled) {
    text = fmt::format("{} is stalled: {}", outcome.job, outcome.error);
  } else if (outcome.event == JobEvent::finished) {
    std::vector<std::string> values;
    for (const auto& [name, value] : outcome.metrics) values.push_back(fmt::format("{} {:.4g}", name, value));
    text = fmt::format("{} finished{}{}", outcome.job, values.empty() ? "" : ": ", fmt::join(values, ", "));
  } else {
    text = fmt::format("{} failed (exit {}, {}): {}", outcome.job, outcome.exit_code, outcome.exit_class,
                       outcome.error);
  }
  if (!outcome.outputs.empty()) text += fmt::format(". Outputs: {}", outcome.outputs);
  return text;
}

nlohmann::json json_body(const JobOutcome& outcome) {
  nlohmann::json body = {{"event", event_name(outcome.event)},
                         {"job", outcome.job},
                         {"source", outcome.source},
                         {"exit_code", outcome.exit_code},
                         {"exit_class", outcome.exit_class},
                         {"text", headline(outcome)}};
  if (outcome.event != JobEvent::finished) body["error"] = outcome.error;
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, value] : outcome.metrics) metrics[name] = value;
  body["metrics"] = metrics;
  if (!outcome.outputs.empty()) {
    body["outputs"] = outcome.outputs;
    body["report"] = outcome.outputs + "/report.html";
  }
  return body;
}

// An Adaptive Card in a message, as Teams' workflow webhooks ("Post to a channel when a webhook request is
// received") take it.
nlohmann::json teams_body(const JobOutcome& outcome) {
  nlohmann::json headline_block = {{"type", "TextBlock"}, {"text", headline(outcome)}, {"wrap", true},
                                   {"color", outcome.event == JobEvent::finished ? "Good" : "Attention"}};
  nlohmann::json source_block = {{"type", "TextBlock"}, {"text", outcome.source}, {"wrap", true}, {"isSubtle", true}};
  nlohmann::json card = {{"type", "AdaptiveCard"},
                         {"$schema", "http://adaptivecards.io/schemas/adaptive-card.json"},
                         {"version", "1.4"},
                         {"body", nlohmann::json::array({headline_block, source_block})}};
  nlohmann::json attachment = {{"contentType", "application/vnd.microsoft.card.adaptive"}, {"content", card}};
  return {{"type", "message"}, {"attachments", nlohmann::json::array({attachment})}};
}

}  // namespace

const char* event_name(JobEvent event) {
  switch (event) {
    case JobEvent::finished: return "finished";
    case JobEvent::stalled: return "stalled";
    case JobEvent::failed: break;
  }
  return "failed";
}

std::string Webhook::shown() const {
  std::smatch match;
  return std::regex_match(url, match, kHttpUrl) ? match[1].str() + "://" + match[3].str() + match[4].str()
                                                : "the webhook";
}

std::vector<Webhook> resolve_webhooks(const std::vector<std::string>& entries, const std::string& format,
                                      const Environment& environment) {
  std::vector<Webhook> webhooks;
  for (std::size_t index = 0; index < entries.size(); ++index) {
    std::string url = entries[index];
    if (url.rfind("env:", 0) == 0) {
      const std::optional<std::string> value = environment(url.substr(4));
      if (!value || value->empty()) continue;  // not given to this pod
      url = *value;
    }
    if (host_of(url).empty()) {
      fail(ExitCode::usage, "notify.webhooks[{}]{}: not an http:// or https:// URL (its value is not shown: it may "
           "hold a secret)", index, entries[index].rfind("env:", 0) == 0 ? " (" + entries[index] + ")" : "");
    }
    const WebhookFormat chosen = format == "json"    ? WebhookFormat::json
                                 : format == "slack" ? WebhookFormat::slack
                                 : format == "teams" ? WebhookFormat::teams
                                                     : format_for_host(host_of(url));
    webhooks.push_back({url, chosen});
  }
  return webhooks;
}

std::string notification_body(const JobOutcome& outcome, WebhookFormat format) {
  switch (format) {
    case WebhookFormat::slack: {
      // Slack's mrkdwn: the headline, then what it trains.
      const std::string mark = outcome.event == JobEvent::finished ? ":white_check_mark:"
                               : outcome.event == JobEvent::failed ? ":x:"
                                                                   : ":warning:";
      return nlohmann::json{{"text", fmt::format("{} {}\n{}", mark, headline(outcome), outcome.source)}}.dump();
    }
    case WebhookFormat::teams: return teams_body(outcome).dump();
    case WebhookFormat::json: break;
  }
  return json_body(outcome).dump();
}

void notify(const std::vector<Webhook>& webhooks, const JobOutcome& outcome) {
  for (const Webhook& webhook : webhooks) {
    const std::optional<std::string> failure =
        post_notification(webhook, notification_body(outcome, webhook.format), std::chrono::seconds(60));
    if (failure) {
      spdlog::warn("{} (the job goes on as it would have)", *failure);
    } else {
      spdlog::info("told {} that {} {}", webhook.shown(), outcome.job, event_name(outcome.event));
    }
  }
}

std::optional<std::string> post_notification(const Webhook& webhook, const std::string& body,
                                             std::chrono::seconds within) {
  http::Settings settings;
  settings.connect_timeout = std::chrono::seconds(5);
  settings.stall_timeout = std::chrono::seconds(10);
  http::Handle handle(settings);
  RetryPolicy policy = RetryPolicy::within(within);
  policy.first_wait = std::chrono::milliseconds(500);
  try {
    retry(policy, [&]() -> std::optional<std::string> {
      http::Request request;
      request.method = "POST";
      request.url = webhook.url;
      request.headers = {{"Content-Type", "application/json"}};
      request.body = http::text_body(body);
      request.body_size = body.size();
      const http::Response response = handle.perform(request);
      // The transport's own words may quote the URL: only its host is named.
      if (response.transport == http::Transport::transient) {
        return fmt::format("notification to {}: no answer", webhook.shown());
      }
      if (response.transport != http::Transport::ok) {
        fail(ExitCode::network, "notification to {}: the connection failed (TLS or the address)", webhook.shown());
      }
      if (response.status / 100 == 2) return std::nullopt;
      const std::string failure = fmt::format("notification to {}: HTTP {}: {}", webhook.shown(), response.status,
                                              response.body.substr(0, 200));
      if (http::transient_status(response.status)) return failure;
      fail(ExitCode::network, "{}", failure);
    });
  } catch (const Error& error) {
    return std::string(error.what());
  }
  return std::nullopt;
}

struct StallNotifier::State {
  std::vector<Webhook> webhooks;
  JobOutcome job;
  std::function<int()> stalled_ranks;
  std::chrono::milliseconds interval;
  std::chrono::seconds stall;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;

  void run() {
    bool told = false;  // about the stall in progress
    std::unique_lock<std::mutex> lock(mutex);
    while (!wake.wait_for(lock, interval, [&] { return stopping; })) {
      const int stalled = stalled_ranks();
      if (stalled == 0) told = false;
      if (stalled == 0 || told) continue;
      told = true;
      JobOutcome outcome = job;
      outcome.event = JobEvent::stalled;
      outcome.error = fmt::format("{} rank(s) made no progress for dist.stall_s ({} s); the pods' logs name them "
                                  "with their step and phase, and the job fails retryable once dist.timeout_s passes",
                                  stalled, stall.count());
      lock.unlock();
      for (const Webhook& webhook : webhooks) {
        const auto failure = post_notification(webhook, notification_body(outcome, webhook.format),
                                               std::chrono::seconds(15));
        if (failure) spdlog::warn("{} (training goes on)", *failure);
      }
      lock.lock();
    }
  }
};

StallNotifier::StallNotifier(std::vector<Webhook> webhooks, JobOutcome job, std::function<int()> stalled_ranks,
                             std::chrono::milliseconds interval, std::chrono::seconds stall)
    : state_(std::make_unique<State>()) {
  state_->webhooks = std::move(webhooks);
  state_->job = std::move(job);
  state_->stalled_ranks = std::move(stalled_ranks);
  state_->interval = interval;
  state_->stall = stall;
  state_->thread = std::thread([state = state_.get()] { state->run(); });
}

StallNotifier::~StallNotifier() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

}  // namespace tp::telemetry
