// /metrics read by a real HTTP client (libcurl, support/http.h) and checked by Prometheus's own promtool.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include "common/error.h"
#include "support/background_process.h"
#include "support/http.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "telemetry/metrics_server.h"

namespace tp::telemetry {
namespace {

// The body of GET http://127.0.0.1:port/path, which must answer 200; its content type in `content_type`.
std::string get(int port, const std::string& path = "/metrics", std::string* content_type = nullptr) {
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + path;
  const testing::HttpResponse response = testing::http_get(url);
  EXPECT_TRUE(response.reached) << url;
  EXPECT_EQ(response.status, 200) << url;
  if (content_type != nullptr) *content_type = response.content_type;
  return response.body;
}

TrainingGauges some_gauges() {
  TrainingGauges gauges;
  gauges.step = 42;
  gauges.epoch = 2;
  gauges.samples_total = 1344;
  gauges.train_loss = 0.25;
  gauges.learning_rate = 0.003;
  gauges.last_step_timestamp_seconds = 1767225600.5;
  gauges.data_wait_seconds_total = 1.5;
  gauges.allreduce_exposed_seconds_total = 0.75;
  gauges.checkpoint_seconds = 0.2;
  gauges.stalled_ranks = 1;
  return gauges;
}

TEST(MetricsServer, ServesTheLatestValuesLabelledWithJobAndRank) {
  MetricsServer server("127.0.0.1", 0, "shapes \"v2\"", 3);
  ASSERT_GT(server.port(), 0);
  // Before the first step: counts, but no loss and no last-step time yet.
  const std::string before = get(server.port());
  EXPECT_NE(before.find("trainpoint_step{trainpoint_job=\"shapes \\\"v2\\\"\",rank=\"3\"} 0\n"), std::string::npos)
      << before;
  EXPECT_EQ(before.find("trainpoint_train_loss"), std::string::npos) << before;
  EXPECT_EQ(before.find("trainpoint_last_step_timestamp_seconds"), std::string::npos) << before;

  server.update(some_gauges());
  std::string content_type;
  const std::string text = get(server.port(), "/metrics", &content_type);
  EXPECT_EQ(content_type.rfind("text/plain; version=0.0.4", 0), 0u) << content_type;
  const std::string labels = "{trainpoint_job=\"shapes \\\"v2\\\"\",rank=\"3\"}";
  for (const std::string& line : std::vector<std::string>{
           "# TYPE trainpoint_step gauge", "trainpoint_step" + labels + " 42", "trainpoint_epoch" + labels + " 2",
        "# TYPE trainpoint_samples_total counter", "trainpoint_samples_total" + labels + " 1344",
        "trainpoint_train_loss" + labels + " 0.25", "trainpoint_learning_rate" + labels + " 0.003",
        "trainpoint_last_step_timestamp_seconds" + labels + " 1767225600.5",
        "trainpoint_data_wait_seconds_total" + labels + " 1.5",
        "trainpoint_allreduce_exposed_seconds_total" + labels + " 0.75",
        "trainpoint_checkpoint_seconds" + labels + " 0.2", "trainpoint_stalled_ranks" + labels + " 1"}) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("gpu_memory"), std::string::npos) << "no CUDA here: no GPU memory samples";
}

TEST(MetricsServer, PromtoolAcceptsTheFormat) {
  TrainingGauges gauges = some_gauges();
  gauges.gpu_memory_allocated_bytes = 1e9;
  gauges.gpu_memory_reserved_bytes = 2e9;
  testing::TempDir dir;
  std::ofstream(dir / "metrics.txt") << render_prometheus(gauges, "shapes", 0);
  // `promtool check metrics` parses the exposition and lints names, types and help (Debian's prometheus).
  const auto result = testing::run_command("promtool check metrics < " + testing::shell_quote((dir / "metrics.txt").string()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(MetricsServer, UpdatesNeverWaitForClients) {
  auto server = std::make_unique<MetricsServer>("127.0.0.1", 0, "shapes", 0);
  // Clients that connect and send half a request occupy every server thread.
  std::vector<int> stalled;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const sockaddr_in address = testing::loopback_address(server->port());
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    const std::string half = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    ASSERT_EQ(::write(fd, half.data(), half.size()), static_cast<ssize_t>(half.size()));
    stalled.push_back(fd);
  }
  // Training goes on: every update returns (a server holding the values while it waits would hang here).
  TrainingGauges gauges;
  for (int step = 1; step <= 10000; ++step) {
    gauges.step = step;
    server->update(gauges);
  }
  for (int fd : stalled) ::close(fd);
  EXPECT_NE(get(server->port()).find("trainpoint_step{trainpoint_job=\"shapes\",rank=\"0\"} 10000\n"),
            std::string::npos);
  server.reset();  // stops even though clients came and went
}

TEST(MetricsServer, APortInUseIsNamed) {
  MetricsServer first("127.0.0.1", 0, "shapes", 0);
  try {
    MetricsServer second("127.0.0.1", first.port(), "shapes", 0);
    ADD_FAILURE() << "two servers on one port";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_NE(std::string(error.what()).find("127.0.0.1:" + std::to_string(first.port())), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace tp::telemetry
