// Progress posted to a TLS status server on loopback (status_server.py) that checks the bearer token, the
// path and every field of the body against Trainer v2.2's TrainerStatus schema; the client trusts only the
// CA it is given.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include "support/captured_log.h"
#include "telemetry/status_server.h"
#include "telemetry/trainer_status.h"

namespace tp::telemetry {
namespace {

using namespace std::chrono_literals;

TrainerStatusEndpoint endpoint_of(const testing::TrainerStatusServer& server) {
  return {server.url(), server.ca_cert(), server.token_file()};
}

TrainerProgress progress(int percent) {
  return {percent, 60 - percent / 2, {{"loss", "0.5"}, {"currentEpoch", "1"}, {"totalEpochs", "3"}}};
}

// Waits (up to 20 s) until the server has accepted `count` bodies.
void wait_for_posts(const testing::TrainerStatusServer& server, std::size_t count) {
  for (int i = 0; i < 400 && server.accepted().size() < count; ++i) std::this_thread::sleep_for(50ms);
}

TEST(TrainerStatus, PostsProgressWithTheTokenTrustingTheGivenCa) {
  testing::TrainerStatusServer server;
  {
    TrainerStatusReporter reporter(endpoint_of(server), 0ms);
    reporter.report(progress(10));
    wait_for_posts(server, 1);
    reporter.report(progress(40));
    wait_for_posts(server, 2);
    reporter.report(progress(100));
  }  // the last progress is posted before the reporter goes
  EXPECT_TRUE(server.rejected().empty()) << server.rejected().front();
  const auto statuses = server.accepted();
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0]["progressPercentage"], 10);
  EXPECT_EQ(statuses[1]["progressPercentage"], 40);
  EXPECT_EQ(statuses[2]["progressPercentage"], 100);
  EXPECT_EQ(statuses[2]["estimatedRemainingSeconds"], 10);
  EXPECT_EQ(statuses[2]["metrics"][1]["name"], "currentEpoch");
  EXPECT_EQ(statuses[2]["metrics"][1]["value"], "1");
}

TEST(TrainerStatus, PostsAtMostOncePerIntervalAndAlwaysTheLast) {
  testing::TrainerStatusServer server;
  {
    TrainerStatusReporter reporter(endpoint_of(server), 60s);
    for (int percent = 1; percent <= 100; ++percent) reporter.report(progress(percent));
  }
  // The first progress goes at once; then nothing for a minute, except the last one when training ends.
  const auto statuses = server.accepted();
  ASSERT_GE(statuses.size(), 1u);
  ASSERT_LE(statuses.size(), 2u);
  EXPECT_EQ(statuses.back()["progressPercentage"], 100);
}

TEST(TrainerStatus, AServerThatFailsOrIsNotTrustedIsOneWarning) {
  for (const bool untrusted : {false, true}) {
    testing::TrainerStatusServer server(/*fail=*/!untrusted);
    TrainerStatusEndpoint endpoint = endpoint_of(server);
    if (untrusted) endpoint.ca_cert = server.other_ca_cert();
    testing::CapturedLog log;
    {
      TrainerStatusReporter reporter(endpoint, 0ms);
      for (int percent = 10; percent <= 100; percent += 10) {
        reporter.report(progress(percent));
        std::this_thread::sleep_for(20ms);
      }
    }
    EXPECT_EQ(log.count("Kubeflow Trainer status: cannot post progress"), 1) << log.text();
    EXPECT_NE(log.text().find(untrusted ? "certificate" : "HTTP 500: Internal error"), std::string::npos)
        << log.text();
    EXPECT_EQ(log.text().find("test-token-of-the-pod"), std::string::npos) << "the token is never logged";
    EXPECT_TRUE(server.accepted().empty());
  }
}

TEST(TrainerStatus, TheEndpointNeedsAllThreeVariables) {
  std::map<std::string, std::string> variables{{"KUBEFLOW_TRAINER_SERVER_URL", "https://trainer:8082/status"},
                                               {"KUBEFLOW_TRAINER_SERVER_CA_CERT", "/var/run/ca.crt"},
                                               {"KUBEFLOW_TRAINER_SERVER_TOKEN", "/var/run/token"}};
  auto lookup = [&](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    return found == variables.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
  const auto endpoint = trainer_status_endpoint(lookup);
  ASSERT_TRUE(endpoint);
  EXPECT_EQ(endpoint->url, "https://trainer:8082/status");
  EXPECT_EQ(endpoint->ca_cert, "/var/run/ca.crt");
  EXPECT_EQ(endpoint->token_file, "/var/run/token");
  variables.erase("KUBEFLOW_TRAINER_SERVER_TOKEN");
  testing::CapturedLog log;
  EXPECT_FALSE(trainer_status_endpoint(lookup));
  EXPECT_EQ(log.count("must all be set"), 1);
  variables.clear();
  EXPECT_FALSE(trainer_status_endpoint(lookup));
  EXPECT_EQ(log.count("must all be set"), 1) << "nothing set: not a TrainJob, nothing to say";
}

TEST(TrainerStatus, TheBodyKeepsToTheSchemasBounds) {
  TrainerProgress odd{140, -5, {{"", "x"}, {std::string(80, 'n'), std::string(80, 'v')}}};
  const auto body = nlohmann::json::parse(trainer_status_body(odd, 1767225600));
  const auto& status = body["trainerStatus"];
  EXPECT_EQ(status["progressPercentage"], 100);
  EXPECT_EQ(status["estimatedRemainingSeconds"], 0);
  EXPECT_EQ(status["lastUpdatedTime"], "2026-01-01T00:00:00Z");
  ASSERT_EQ(status["metrics"].size(), 1u) << "a metric without a name is left out";
  EXPECT_EQ(status["metrics"][0]["name"].get<std::string>().size(), 64u);
  EXPECT_EQ(status["metrics"][0]["value"].get<std::string>().size(), 64u);
}

}  // namespace
}  // namespace tp::telemetry
