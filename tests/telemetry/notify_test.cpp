// Notifications of a job's end (telemetry/notify.h): the webhook from the environment, each format's body, and
// the post against a local receiver that is briefly down or refuses.
#include "telemetry/notify.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "telemetry/webhook_receiver.h"

namespace tp::telemetry {
namespace {

// notify.webhooks = [entry] in `format`, with `variables` as the environment.
std::vector<Webhook> resolved(const std::string& entry, const std::string& format = "auto",
                              const std::map<std::string, std::string>& variables = {}) {
  return resolve_webhooks({entry}, format, [&](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    return found == variables.end() ? std::nullopt : std::optional<std::string>(found->second);
  });
}

JobOutcome finished() {
  JobOutcome outcome;
  outcome.job = "moons-ddp";
  outcome.source = "train.toml of https://git.example.org/team/moons.git at 3f1c2a9";
  outcome.event = JobEvent::finished;
  outcome.metrics = {{"epoch", 5}, {"valid_loss", 0.4123}, {"accuracy", 0.875}};
  outcome.outputs = "s3://models/moons";
  return outcome;
}

JobOutcome failed() {
  JobOutcome outcome = finished();
  outcome.event = JobEvent::failed;
  outcome.exit_code = 3;
  outcome.exit_class = "spec error";
  outcome.error = "train.toml:4:1: unknown key 'train.epoch'";
  outcome.metrics.clear();
  return outcome;
}

TEST(Notify, WebhooksComeFromTheSpecOrTheEnvironmentAndTheFormatFollowsTheHostUnlessNamed) {
  // The default entry names the Secret's variable: unset, there is no webhook.
  EXPECT_TRUE(resolved("env:TRAINPOINT_NOTIFY_WEBHOOK").empty());
  const auto from_secret =
      resolved("env:TRAINPOINT_NOTIFY_WEBHOOK", "auto",
               {{"TRAINPOINT_NOTIFY_WEBHOOK", "https://hooks.slack.com/services/T0/B0/s3cr3t"}});
  ASSERT_EQ(from_secret.size(), 1u);
  EXPECT_EQ(from_secret[0].format, WebhookFormat::slack);
  // What messages show of it: the scheme and host, not the path that is the secret.
  EXPECT_EQ(from_secret[0].shown(), "https://hooks.slack.com");
  // Nor a password in the URL.
  EXPECT_EQ(resolved("http://bot:pa55word@alerts.internal:8080/hook")[0].shown(), "http://alerts.internal:8080");
  EXPECT_EQ(resolved("https://agency.webhook.office.com/webhookb2/x")[0].format, WebhookFormat::teams);
  EXPECT_EQ(resolved("https://prod-12.westeurope.logic.azure.com:443/workflows/x")[0].format, WebhookFormat::teams);
  EXPECT_EQ(resolved("http://alerts.internal:8080/hook")[0].format, WebhookFormat::json);
  EXPECT_EQ(resolved("https://hooks.slack.com/services/T0/B0/x", "json")[0].format, WebhookFormat::json);
  EXPECT_EQ(resolved("http://alerts.internal:8080/hook", "teams")[0].format, WebhookFormat::teams);
}

TEST(Notify, AWrongWebhookIsAUsageErrorThatDoesNotShowIt) {
  try {
    resolved("env:HOOK", "auto", {{"HOOK", "hooks.slack.com/services/T0/B0/s3cr3t"}});
    ADD_FAILURE() << "accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_EQ(std::string(error.what()), "notify.webhooks[0] (env:HOOK): not an http:// or https:// URL (its value is "
                                         "not shown: it may hold a secret)");
  }
}

TEST(Notify, EachFormatSaysHowTheJobEndedAndWhereItsOutputsAre) {
  const nlohmann::json json = nlohmann::json::parse(notification_body(finished(), WebhookFormat::json));
  EXPECT_EQ(json["event"], "finished");
  EXPECT_EQ(json["job"], "moons-ddp");
  EXPECT_EQ(json["metrics"]["accuracy"], 0.875);
  EXPECT_EQ(json["report"], "s3://models/moons/report.html");
  EXPECT_EQ(json["text"], "moons-ddp finished: epoch 5, valid_loss 0.4123, accuracy 0.875. Outputs: s3://models/moons");
  const nlohmann::json failure = nlohmann::json::parse(notification_body(failed(), WebhookFormat::json));
  EXPECT_EQ(failure["event"], "failed");
  EXPECT_EQ(failure["exit_code"], 3);
  EXPECT_EQ(failure["error"], "train.toml:4:1: unknown key 'train.epoch'");

  const nlohmann::json slack = nlohmann::json::parse(notification_body(failed(), WebhookFormat::slack));
  EXPECT_EQ(slack["text"], ":x: moons-ddp failed (exit 3, spec error): train.toml:4:1: unknown key 'train.epoch'. "
                           "Outputs: s3://models/moons\ntrain.toml of https://git.example.org/team/moons.git at 3f1c2a9");
  const nlohmann::json teams = nlohmann::json::parse(notification_body(finished(), WebhookFormat::teams));
  EXPECT_EQ(teams["type"], "message");
  const nlohmann::json& card = teams["attachments"][0]["content"];
  EXPECT_EQ(teams["attachments"][0]["contentType"], "application/vnd.microsoft.card.adaptive");
  EXPECT_EQ(card["type"], "AdaptiveCard");
  EXPECT_EQ(card["body"][0]["text"], json["text"]);
  EXPECT_EQ(card["body"][0]["color"], "Good");
}

TEST(Notify, AServerBrieflyDownGetsTheNotificationOnceAndARefusalIsNamedWithoutTheSecret) {
  testing::WebhookReceiver receiver("teams", /*fail_first=*/2);
  const Webhook webhook{receiver.url(), WebhookFormat::teams};
  EXPECT_EQ(post_notification(webhook, notification_body(finished(), WebhookFormat::teams), std::chrono::seconds(30)),
            std::nullopt);
  ASSERT_EQ(receiver.accepted().size(), 1u);
  EXPECT_EQ(receiver.accepted()[0]["attachments"][0]["content"]["body"][1]["text"], finished().source);

  // Slack's format to a receiver of Teams' is refused (400, not retried), and said without the URL's path.
  const std::optional<std::string> refused =
      post_notification(webhook, notification_body(finished(), WebhookFormat::slack), std::chrono::seconds(30));
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("notification to http://127.0.0.1:"), std::string::npos) << *refused;
  EXPECT_NE(refused->find("HTTP 400: invalid_payload"), std::string::npos) << *refused;
  EXPECT_EQ(refused->find(testing::WebhookReceiver::kSecret), std::string::npos) << *refused;
  EXPECT_EQ(receiver.rejected(), std::vector<std::string>{"not a message with one attachment"});
}

TEST(Notify, AStallIsToldOnceUntilEveryRankMovedOnAgain) {
  testing::WebhookReceiver receiver("json");
  std::atomic<int> stalled{0};
  {
    StallNotifier watch({Webhook{receiver.url(), WebhookFormat::json}}, finished(), [&] { return stalled.load(); },
                        std::chrono::milliseconds(20), std::chrono::seconds(300));
    const auto settle = [] { std::this_thread::sleep_for(std::chrono::milliseconds(400)); };
    settle();
    EXPECT_TRUE(receiver.accepted().empty());
    stalled = 2;
    settle();
    stalled = 1;  // still stalled: told once
    settle();
    ASSERT_EQ(receiver.accepted().size(), 1u);
    stalled = 0;
    settle();
    stalled = 1;  // a new stall
    settle();
  }
  const std::vector<nlohmann::json> bodies = receiver.accepted();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0]["event"], "stalled");
  EXPECT_EQ(bodies[0]["text"].get<std::string>().rfind("moons-ddp is stalled: 2 rank(s) made no progress for "
                                                       "dist.stall_s (300 s)", 0), 0u) << bodies[0];
  EXPECT_EQ(bodies[1]["error"].get<std::string>().rfind("1 rank(s)", 0), 0u) << bodies[1];
}

}  // namespace
}  // namespace tp::telemetry
