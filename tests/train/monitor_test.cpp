// The run monitor: step times that add up, /metrics on local rank 0 only, progress posted to a TLS status
// server (tests/telemetry/status_server.py) rising to 100%, and the epoch line with its hint.
#include "train/monitor.h"

#include <gtest/gtest.h>

#include <thread>

#include "support/background_process.h"
#include "support/http.h"
#include "telemetry/status_server.h"

namespace tp::train {
namespace {

using namespace std::chrono_literals;

std::optional<std::string> no_environment(const std::string&) { return std::nullopt; }

// The body of GET http://127.0.0.1:port/metrics, or nothing when no server answers.
std::optional<std::string> metrics_at(int port) {
  const auto response = testing::http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics");
  return response.reached ? std::optional<std::string>(response.body) : std::nullopt;
}

StepRecord step(std::int64_t number) {
  StepRecord record{number, 0.01, 1.0 / static_cast<double>(number)};
  record.times[StepPart::data_wait] = 0.5;
  record.times[StepPart::allreduce] = 0.25;
  record.seconds = record.times.total();
  return record;
}

TEST(StepTimer, EveryMomentOfAStepBelongsToOnePart) {
  StepTimer timer;
  timer.start();
  std::this_thread::sleep_for(20ms);  // waiting for data
  timer.enter(StepPart::forward_backward);
  std::this_thread::sleep_for(30ms);
  timer.enter(StepPart::allreduce);
  timer.enter(StepPart::optimizer);
  std::this_thread::sleep_for(10ms);
  const StepTimer::Step first = timer.end_step();
  EXPECT_GE(first.times[StepPart::data_wait], 0.020);
  EXPECT_GE(first.times[StepPart::forward_backward], 0.030);
  EXPECT_GE(first.times[StepPart::optimizer], 0.010);
  EXPECT_EQ(first.times[StepPart::checkpoint], 0);
  EXPECT_NEAR(first.times.total(), first.seconds, 1e-9) << "the parts add up to the step";
  // The next step starts where this one ended, waiting for data.
  std::this_thread::sleep_for(5ms);
  const StepTimer::Step second = timer.end_step();
  EXPECT_GE(second.times[StepPart::data_wait], 0.005);
  EXPECT_EQ(second.times[StepPart::forward_backward], 0);
  EXPECT_NEAR(second.times.total(), second.seconds, 1e-9);
}

TEST(RunMonitor, LocalRankZeroServesMetricsAndOtherRanksDoNot) {
  const int port = testing::free_port();
  MonitorSettings settings;
  settings.job = "shapes";
  settings.rank = 2;
  settings.metrics_port = port;
  settings.metrics_address = "127.0.0.1";
  settings.total_steps = 10;
  settings.total_epochs = 2;
  RunMonitor monitor(settings, no_environment);
  monitor.start_epoch(1);
  monitor.step_done(step(1), 32, 0);
  monitor.step_done(step(2), 32, 1);
  monitor.checkpoint_written(0.125);
  const auto text = metrics_at(port);
  ASSERT_TRUE(text);
  const std::string labels = "{trainpoint_job=\"shapes\",rank=\"2\"}";
  for (const std::string& line : std::vector<std::string>{"trainpoint_step" + labels + " 2", "trainpoint_epoch" + labels + " 1",
                                 "trainpoint_samples_total" + labels + " 64", "trainpoint_train_loss" + labels + " 0.5",
                                 "trainpoint_data_wait_seconds_total" + labels + " 1",
                                 "trainpoint_allreduce_exposed_seconds_total" + labels + " 0.5",
                                 "trainpoint_checkpoint_seconds" + labels + " 0.125",
                                 "trainpoint_stalled_ranks" + labels + " 1"}) {
    EXPECT_NE(text->find(line + "\n"), std::string::npos) << line << "\n" << *text;
  }
  const auto at = text->find("trainpoint_last_step_timestamp_seconds" + labels + " ");
  ASSERT_NE(at, std::string::npos);
  const double stamp = std::stod(text->substr(at + 38 + labels.size() + 1));
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(stamp, now, 30);

  // Local rank 1 of the same node serves nothing; a port already taken is a warning, not a failure.
  settings.local_rank = 1;
  settings.metrics_port = testing::free_port();
  RunMonitor other(settings, no_environment);
  EXPECT_FALSE(metrics_at(settings.metrics_port));
  settings.local_rank = 0;
  settings.metrics_port = port;
  EXPECT_NO_THROW({ RunMonitor taken(settings, no_environment); });
}

TEST(RunMonitor, RankZeroReportsProgressUpTo100Percent) {
  testing::TrainerStatusServer server;
  auto environment = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "KUBEFLOW_TRAINER_SERVER_URL") return server.url();
    if (name == "KUBEFLOW_TRAINER_SERVER_CA_CERT") return server.ca_cert().string();
    if (name == "KUBEFLOW_TRAINER_SERVER_TOKEN") return server.token_file().string();
    return std::nullopt;
  };
  MonitorSettings settings;
  settings.job = "shapes";
  settings.total_steps = 4;
  settings.total_epochs = 2;
  settings.status_interval = 0ms;
  {
    RunMonitor monitor(settings, environment);
    for (int s = 1; s <= 4; ++s) {
      if (s == 1 || s == 3) monitor.start_epoch((s + 1) / 2);
      monitor.step_done(step(s), 16, 0);
      for (int i = 0; i < 100 && server.accepted().empty(); ++i) std::this_thread::sleep_for(20ms);
    }
    EpochMetrics last;
    last.epoch = 2;
    last.step = 4;
    last.valid_loss = 0.3;
    last.valid_accuracy = 0.9;
    last.top_k_accuracy = last.mae = std::nan("");
    monitor.epoch_done(last);
    monitor.finished();
  }
  const auto statuses = server.accepted();
  ASSERT_GE(statuses.size(), 2u);
  int previous = -1;
  for (const auto& status : statuses) {
    EXPECT_GE(status["progressPercentage"].get<int>(), previous) << "progress never goes back";
    previous = status["progressPercentage"];
  }
  EXPECT_LT(statuses.front()["progressPercentage"].get<int>(), 100);
  const auto& last = statuses.back();
  EXPECT_EQ(last["progressPercentage"], 100);
  EXPECT_EQ(last["estimatedRemainingSeconds"], 0);
  std::map<std::string, std::string> metrics;
  for (const auto& metric : last["metrics"]) metrics[metric["name"]] = metric["value"];
  EXPECT_EQ(metrics["loss"], "0.25");
  EXPECT_EQ(metrics["eval_loss"], "0.3");
  EXPECT_EQ(metrics["accuracy"], "0.9");
  EXPECT_EQ(metrics["currentEpoch"], "2");
  EXPECT_EQ(metrics["totalEpochs"], "2");
  EXPECT_EQ(metrics.count("mae"), 0u) << "metrics that do not apply are left out";

  // Rank 1 never reports, whatever its environment says.
  settings.rank = 1;
  {
    RunMonitor monitor(settings, environment);
    monitor.finished();
  }
  EXPECT_EQ(server.accepted().size(), statuses.size());
}

TEST(EpochLine, GivesThroughputTheDataWaitShareAndAHintAbove10Percent) {
  EpochMetrics m;
  m.epoch = 2;
  m.step = 40;
  m.lr = 0.003;
  m.train_loss = 0.5;
  m.valid_loss = 0.6;
  m.valid_accuracy = 0.8;
  m.error_rate = 0.2;
  m.top_k_accuracy = m.mae = m.mse = std::nan("");
  m.seconds = 12.5;
  spec::DataSpec data;
  data.format = spec::DataFormat::image_folder;
  data.workers = 2;
  data.staging = spec::Staging::stream;
  EpochThroughput fast{6400, 10.0, {}};
  fast.times[StepPart::data_wait] = 0.5;
  const EpochLine quick = epoch_line(m, 5, 5, fast, data, 0);
  EXPECT_EQ(quick.text,
            "epoch 2/5: train_loss 0.5000 valid_loss 0.6000 accuracy 0.8000 error_rate 0.2000 lr 0.003 (12.5s); "
            "640 images/s, data wait 5% of step time");
  EXPECT_EQ(quick.fields["epoch"], 2);
  EXPECT_EQ(quick.fields["step"], 40);
  EXPECT_EQ(quick.fields["train_loss"], 0.5);
  EXPECT_EQ(quick.fields["valid_loss"], 0.6);
  EXPECT_EQ(quick.fields["accuracy"], 0.8);
  EXPECT_EQ(quick.fields["lr"], 0.003);
  EXPECT_EQ(quick.fields["images_per_s"], 640);
  EXPECT_EQ(quick.fields["rank"], 0);

  EpochThroughput starved = fast;
  starved.times[StepPart::data_wait] = 2.5;
  const std::string hint = epoch_line(m, 5, 5, starved, data, 0).text;
  EXPECT_NE(hint.find("data wait 25% of step time: training waits for data; more loader threads (data.workers, "
                      "now 2) or data staged on the node before training (data.staging = \"all\" instead of "
                      "\"stream\") may help"),
            std::string::npos)
      << hint;
  data.staging = spec::Staging::all;
  EXPECT_EQ(epoch_line(m, 5, 5, starved, data, 0).text.find("data.staging"), std::string::npos)
      << "staged data: only the workers can help";
}

}  // namespace
}  // namespace tp::train
