// A real 2-rank trainpoint run watched from outside: Debian's Prometheus scraping its /metrics (read back
// through Prometheus's HTTP API), and a TLS status server standing in for Kubeflow Trainer's controller.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/background_process.h"
#include "support/http.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "telemetry/status_server.h"
#include "telemetry/webhook_receiver.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::run_checked;
using testing::shell_quote;

std::string http_get(const std::string& url) {
  return testing::http_get(url).body;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A git repository of generated images and a spec for a short image classification run.
class WatchedRun : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "repo";
    run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote((repo_ / "data").string()) +
                " --classes 2 --per-class 120 --size 16 --format png --seed 5");
    testing::write_text(repo_ / "train.toml", R"([job]
name = "watched"
output = "out"

[data]
source = "data"
image_size = 16
valid = 0.2
workers = 1

[model]
arch = "small_cnn"

[train]
epochs = 2
batch_size = 8
)");
    const std::string git = "git -C " + shell_quote(repo_.string()) + " -c user.name=t -c user.email=t@example.invalid ";
    run_checked("git init -q -b main " + shell_quote(repo_.string()));
    run_checked(git + "add -A && " + git + "commit -q -m data");
  }

  // `trainpoint run` of the repository on 2 ranks, with `extra` arguments and the `environment` prefix; its
  // own rendezvous port, as ctest runs tests side by side.
  std::string run_command(const std::string& environment, const std::string& extra) const {
    return environment + "MASTER_PORT=" + std::to_string(testing::free_port()) + " " + testing::trainpoint_binary() +
           " run --repo " + shell_quote(repo_.string()) +
           " --ref main --spec train.toml --set dist.nproc_per_node=2 --workdir " +
           shell_quote((dir_ / "work").string()) + " " + extra;
  }

  testing::TempDir dir_;
  fs::path repo_;
};

TEST_F(WatchedRun, PrometheusScrapesTheStepAsItGrows) {
  const int metrics_port = testing::free_port();
  const int prometheus_port = testing::free_port();
  testing::write_text(dir_ / "prometheus.yml", "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                                               "scrape_configs:\n  - job_name: trainpoint\n    static_configs:\n"
                                               "      - targets: ['127.0.0.1:" + std::to_string(metrics_port) + "']\n");
  testing::BackgroundProcess prometheus(
      "prometheus --config.file=" + shell_quote((dir_ / "prometheus.yml").string()) +
          " --storage.tsdb.path=" + shell_quote((dir_ / "tsdb").string()) +
          " --web.listen-address=127.0.0.1:" + std::to_string(prometheus_port),
      dir_ / "prometheus.log");
  testing::wait_for_port(prometheus_port, 60s);
  const std::string api = "http://127.0.0.1:" + std::to_string(prometheus_port) + "/api/v1/";
  for (int i = 0; i < 300 && http_get(api.substr(0, api.size() - 7) + "-/ready").find("Ready") == std::string::npos; ++i)
    std::this_thread::sleep_for(100ms);

  // Enough steps for several scrapes at 1 s (Prometheus offsets its first scrape by up to an interval): 100
  // epochs of 12 steps per rank, about 12 s here.
  const auto result = testing::run_command(
      run_command("", "--set train.epochs=100 --set job.metrics_port=" + std::to_string(metrics_port)));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("serving Prometheus metrics at http://0.0.0.0:" + std::to_string(metrics_port)),
            std::string::npos)
      << result.output;

  // Every sample Prometheus scraped in the last 10 minutes, in order.
  const auto steps = nlohmann::json::parse(http_get(api + "query?query=trainpoint_step%5B10m%5D"));
  ASSERT_EQ(steps["status"], "success") << steps.dump();
  ASSERT_EQ(steps["data"]["result"].size(), 1u) << "local rank 0 of the one node serves: " << steps.dump();
  const auto& series = steps["data"]["result"][0];
  EXPECT_EQ(series["metric"]["trainpoint_job"], "watched");
  EXPECT_EQ(series["metric"]["rank"], "0");
  EXPECT_EQ(series["metric"]["job"], "trainpoint") << "Prometheus's own job label is left alone";
  std::vector<double> values;
  for (const auto& sample : series["values"]) values.push_back(std::stod(sample[1].get<std::string>()));
  ASSERT_GE(values.size(), 2u) << series.dump();
  for (std::size_t i = 1; i < values.size(); ++i) EXPECT_GE(values[i], values[i - 1]) << series.dump();
  EXPECT_GT(values.back(), values.front()) << "the step grew between scrapes: " << series.dump();

  const auto last = nlohmann::json::parse(
      http_get(api + "query?query=last_over_time(trainpoint_last_step_timestamp_seconds%5B10m%5D)"));
  ASSERT_EQ(last["data"]["result"].size(), 1u) << last.dump();
  const double stamp = std::stod(last["data"]["result"][0]["value"][1].get<std::string>());
  EXPECT_NEAR(stamp, unix_now(), 30) << "the last step ended within 30 s of now";
}

TEST_F(WatchedRun, RankZeroReportsProgressToKubeflowTrainerUpTo100Percent) {
  testing::TrainerStatusServer server;
  const auto result = testing::run_command(run_command(server.environment(), ""));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(server.rejected().empty()) << server.rejected().front();
  const auto statuses = server.accepted();
  ASSERT_GE(statuses.size(), 2u) << result.output;
  EXPECT_LT(statuses.front()["progressPercentage"].get<int>(), 100);
  EXPECT_EQ(statuses.back()["progressPercentage"], 100);
  EXPECT_EQ(statuses.back()["estimatedRemainingSeconds"], 0);
  int complete = 0;
  for (const auto& status : statuses) complete += status["progressPercentage"] == 100;
  EXPECT_EQ(complete, 1) << "one rank reports, once at the end";
  std::map<std::string, std::string> metrics;
  for (const auto& metric : statuses.back()["metrics"]) metrics[metric["name"]] = metric["value"];
  EXPECT_EQ(metrics["currentEpoch"], "2");
  EXPECT_EQ(metrics["totalEpochs"], "2");
  EXPECT_TRUE(metrics.count("loss") && metrics.count("eval_loss") && metrics.count("accuracy")) << statuses.back();

  // Where each step's time went, in steps.jsonl: the parts add up to the step within 5%.
  std::ifstream steps(dir_ / "work/out/steps.jsonl");
  int lines = 0;
  for (std::string text; std::getline(steps, text); ++lines) {
    const auto step = nlohmann::json::parse(text);
    double parts = 0;
    for (const char* part : {"data_wait_s", "forward_backward_s", "allreduce_s", "optimizer_s", "checkpoint_s"}) {
      ASSERT_TRUE(step.contains(part)) << text;
      EXPECT_GE(step[part].get<double>(), 0) << text;
      parts += step[part].get<double>();
    }
    EXPECT_NEAR(parts, step["step_s"].get<double>(), 0.05 * step["step_s"].get<double>()) << text;
    EXPECT_GT(step["forward_backward_s"].get<double>(), 0) << text;
  }
  EXPECT_EQ(lines, 24) << "2 epochs of 12 steps";
  // The epoch line gives the throughput and the data-wait share.
  EXPECT_NE(result.output.find("images/s, data wait "), std::string::npos) << result.output;
  // and, after the epoch's checkpoint, how long saving it took (the save has no line of its own).
  EXPECT_NE(result.output.find("; checkpoint saved in "), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("info [rank 0] checkpoint "), std::string::npos) << result.output;
  // One line per epoch: the progress bar closes without a line of its own (it draws every 10 s without a
  // terminal, far longer than these epochs).
  std::size_t epoch_lines = 0;
  for (auto at = result.output.find("epoch 1/2"); at != std::string::npos; at = result.output.find("epoch 1/2", at + 1)) {
    ++epoch_lines;
  }
  EXPECT_EQ(epoch_lines, 1u) << result.output;
}

TEST_F(WatchedRun, AFailingStatusServerChangesNothingButOneWarning) {
  testing::TrainerStatusServer failing(/*fail=*/true);
  const auto result = testing::run_command(run_command(failing.environment(), ""));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::exists(dir_ / "work/out/model.pt"));
  EXPECT_TRUE(fs::exists(dir_ / "work/out/run.json"));
  std::size_t warnings = 0;
  for (auto at = result.output.find("Kubeflow Trainer status: cannot post progress"); at != std::string::npos;
       at = result.output.find("Kubeflow Trainer status: cannot post progress", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << result.output;
  EXPECT_EQ(result.output.find("test-token-of-the-pod"), std::string::npos) << "the token is never logged";
}

// The job's end told to a webhook (telemetry/notify.h), once, by the node of rank 0 alone, after the receiver's
// first answer was a 503: the last epoch's metrics as metrics.jsonl has them, and never the URL's secret path.
TEST_F(WatchedRun, AFinishedRunIsToldToTheWebhookOnceWithItsLastEpochsMetrics) {
  testing::WebhookReceiver receiver("json", /*fail_first=*/1);
  const auto result = testing::run_command(
      run_command("TRAINPOINT_NOTIFY_WEBHOOK=" + shell_quote(receiver.url()) + " ", ""));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::vector<nlohmann::json> bodies = receiver.accepted();
  ASSERT_EQ(bodies.size(), 1u) << result.output;
  const nlohmann::json& body = bodies[0];
  EXPECT_EQ(body["event"], "finished");
  EXPECT_EQ(body["job"], "watched");
  EXPECT_EQ(body["outputs"], "out");
  EXPECT_EQ(body["source"].get<std::string>().rfind("train.toml of " + repo_.string() + " at ", 0), 0u) << body;
  std::ifstream metrics(dir_ / "work/out/metrics.jsonl");
  std::string line, last;
  while (std::getline(metrics, line)) last = line;
  const nlohmann::json epoch = nlohmann::json::parse(last);
  EXPECT_EQ(body["metrics"]["epoch"], 2);
  EXPECT_DOUBLE_EQ(body["metrics"]["valid_loss"].get<double>(), epoch["valid_loss"].get<double>());
  EXPECT_DOUBLE_EQ(body["metrics"]["accuracy"].get<double>(), epoch["accuracy"].get<double>());
  EXPECT_DOUBLE_EQ(body["metrics"]["f1"].get<double>(), epoch["f1"].get<double>());
  EXPECT_NE(result.output.find("told http://127.0.0.1:"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find(testing::WebhookReceiver::kSecret), std::string::npos) << result.output;
  EXPECT_TRUE(receiver.rejected().empty());
}

// A permanent failure is told, with the one line the log ends with: before the spec loads by [notify]'s
// defaults (the Secret's variable), after by the spec's own (Slack's format here); not when notify.on leaves
// failures out. A retryable failure is not told: the pod is restarted and the job goes on.
TEST_F(WatchedRun, APermanentFailureIsToldAndARetryableOneIsNot) {
  testing::WebhookReceiver secret_hook("json");
  const std::string webhook = "TRAINPOINT_NOTIFY_WEBHOOK=" + shell_quote(secret_hook.url()) + " ";
  const auto broken = testing::run_command(run_command(webhook, "--set train.epoch=3"));
  EXPECT_EQ(broken.exit_code, 3) << broken.output;
  ASSERT_EQ(secret_hook.accepted().size(), 1u) << broken.output;
  const nlohmann::json told = secret_hook.accepted()[0];
  EXPECT_EQ(told["event"], "failed");
  EXPECT_EQ(told["job"], "the job of train.toml") << "the spec did not load";
  EXPECT_EQ(told["exit_class"], "spec error");
  EXPECT_EQ(told["error"].get<std::string>().rfind("preflight check 'spec' failed: --set train.epoch=3: unknown key "
                                                   "'train.epoch'", 0), 0u) << told;
  // The commit is known: the repository was cloned before the spec was read.
  std::string commit = run_checked("git -C " + shell_quote(repo_.string()) + " rev-parse main");
  commit.pop_back();
  EXPECT_EQ(told["source"], "train.toml of " + repo_.string() + " at " + commit);

  testing::WebhookReceiver slack("slack");
  const std::string in_spec = "--set 'notify.webhooks=[\"" + slack.url() + "\"]' --set notify.format=slack ";
  const auto no_data = testing::run_command(run_command("", in_spec + "--set data.source=nowhere"));
  EXPECT_EQ(no_data.exit_code, 5) << no_data.output;
  ASSERT_EQ(slack.accepted().size(), 1u) << no_data.output;
  const std::string text = slack.accepted()[0]["text"];
  EXPECT_EQ(text.rfind(":x: watched failed (exit 5, ", 0), 0u) << text;
  EXPECT_NE(text.find("data.source"), std::string::npos) << text;
  EXPECT_EQ(no_data.output.find(testing::WebhookReceiver::kSecret), std::string::npos) << no_data.output;
  const auto not_wanted = testing::run_command(
      run_command("", in_spec + "--set 'notify.on=[\"finished\"]' --set data.source=nowhere"));
  EXPECT_EQ(not_wanted.exit_code, 5) << not_wanted.output;
  EXPECT_EQ(slack.accepted().size(), 1u) << not_wanted.output;

  // The first of two pods, whose partner never comes: the rendezvous times out (exit 202, retryable).
  const auto lost = testing::run_command(
      run_command(webhook + "PET_NNODES=2 PET_NODE_RANK=0 PET_NPROC_PER_NODE=2 PET_MASTER_ADDR=127.0.0.1 ",
                  "--set dist.timeout_s=2 --no-preflight"));
  EXPECT_EQ(lost.exit_code, 202) << lost.output;
  EXPECT_EQ(secret_hook.accepted().size(), 1u) << lost.output;
}

}  // namespace
}  // namespace tp
