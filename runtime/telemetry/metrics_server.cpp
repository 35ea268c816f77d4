#include "telemetry/metrics_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include "common/error.h"

namespace tp::telemetry {
namespace {

// A label value with \, " and newline escaped as the text format wants.
std::string escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

}  // namespace

std::string render_prometheus(const TrainingGauges& g, const std::string& job, int rank) {
  const std::string labels = fmt::format("{{trainpoint_job=\"{}\",rank=\"{}\"}}", escaped(job), rank);
  std::string text;
  auto metric = [&](const char* name, const char* type, const char* help, std::optional<double> value) {
    if (!value) return;
    text += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0}{3} {4}\n", name, help, type, labels, number(*value));
  };
  auto integer = [](std::int64_t value) { return std::optional<double>(static_cast<double>(value)); };
  metric("trainpoint_step", "gauge", "Optimizer steps taken.", integer(g.step));
  metric("trainpoint_epoch", "gauge", "The epoch in progress (1-based).", integer(g.epoch));
  metric("trainpoint_samples_total", "counter", "Samples this rank trained on since the process started.",
         integer(g.samples_total));
  metric("trainpoint_train_loss", "gauge", "Mean training loss of the last step on this rank.", g.train_loss);
  metric("trainpoint_learning_rate", "gauge", "Learning rate of the last step.", g.learning_rate);
  metric("trainpoint_last_step_timestamp_seconds", "gauge", "Unix time at which the last step ended.",
         g.last_step_timestamp_seconds);
  metric("trainpoint_data_wait_seconds_total", "counter", "Time spent waiting for batches.",
         g.data_wait_seconds_total);
  metric("trainpoint_forward_backward_seconds_total", "counter", "Time spent in forward and backward passes.",
         g.forward_backward_seconds_total);
  metric("trainpoint_allreduce_exposed_seconds_total", "counter",
         "Time spent waiting for gradient averaging after backward (not overlapped with it).",
         g.allreduce_exposed_seconds_total);
  metric("trainpoint_optimizer_seconds_total", "counter", "Time spent in optimizer steps.", g.optimizer_seconds_total);
  metric("trainpoint_checkpoint_seconds", "gauge", "How long the last checkpoint took to write.", g.checkpoint_seconds);
  metric("trainpoint_stalled_ranks", "gauge", "Ranks whose step and phase have not changed for dist.stall_s.",
         integer(g.stalled_ranks));
  metric("trainpoint_gpu_memory_allocated_bytes", "gauge", "GPU memory held by tensors on this rank's device.",
         g.gpu_memory_allocated_bytes);
  metric("trainpoint_gpu_memory_reserved_bytes", "gauge", "GPU memory reserved by the caching allocator.",
         g.gpu_memory_reserved_bytes);
  return text;
}

struct MetricsServer::State {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> listening_ended{false};
  int port = 0;
  std::string job;
  int rank = 0;
  std::mutex mutex;  // guards gauges
  TrainingGauges gauges;
};

MetricsServer::MetricsServer(const std::string& address, int port, std::string job, int rank)
    : state_(std::make_unique<State>()) {
  State& state = *state_;
  state.job = std::move(job);
  state.rank = rank;
  // Two threads are plenty for a scraper or two; idle and slow clients are dropped after a few seconds.
  state.server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  state.server.set_read_timeout(3, 0);
  state.server.set_write_timeout(3, 0);
  state.server.set_keep_alive_timeout(1);
  // SO_REUSEADDR (a restarted job gets its port back at once) but not cpp-httplib's SO_REUSEPORT, with
  // which a second job would share the port and answer half the scrapes.
  state.server.set_socket_options([](socket_t socket) {
    const int yes = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  state.server.Get("/metrics", [&state](const httplib::Request&, httplib::Response& response) {
    TrainingGauges snapshot;
    {
      std::lock_guard<std::mutex> lock(state.mutex);
      snapshot = state.gauges;
    }
    response.set_content(render_prometheus(snapshot, state.job, state.rank), "text/plain; version=0.0.4; charset=utf-8");
  });
  state.port = port == 0 ? state.server.bind_to_any_port(address) : port;
  const bool bound = port == 0 ? state.port > 0 : state.server.bind_to_port(address, port);
  if (!bound) {
    fail(ExitCode::usage, "cannot serve metrics on {}:{} (job.metrics_port): the port is in use or not allowed",
         address, port);
  }
  state.thread = std::thread([&state] {
    state.server.listen_after_bind();
    state.listening_ended = true;
  });
  // stop() does nothing to a server that is not running yet: wait until it is (or could not run).
  while (!state.server.is_running() && !state.listening_ended) std::this_thread::yield();
}

MetricsServer::~MetricsServer() {
  state_->server.stop();
  state_->thread.join();
}

void MetricsServer::update(const TrainingGauges& gauges) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->gauges = gauges;
}

int MetricsServer::port() const {
  return state_->port;
}

}  // namespace tp::telemetry
