#include "telemetry/trainer_status.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/time.h"
#include "http/transfer.h"

namespace tp::telemetry {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kUrlVariable = "KUBEFLOW_TRAINER_SERVER_URL";
constexpr const char* kCaVariable = "KUBEFLOW_TRAINER_SERVER_CA_CERT";
constexpr const char* kTokenVariable = "KUBEFLOW_TRAINER_SERVER_TOKEN";
// The API's limits: 256 metrics, names and values of 1 to 64 characters.
constexpr std::size_t kMaxMetrics = 256;
constexpr std::size_t kMaxText = 64;

// The token file's contents without surrounding whitespace; empty when it cannot be read.
std::string read_token(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const auto first = token.find_first_not_of(" \t\r\n");
  const auto last = token.find_last_not_of(" \t\r\n");
  return first == std::string::npos ? std::string() : token.substr(first, last - first + 1);
}

// One POST; nothing when it was accepted, else why not (never the token).
std::optional<std::string> post(const TrainerStatusEndpoint& endpoint, const std::string& body) {
  const std::string token = read_token(endpoint.token_file);
  if (token.empty()) return fmt::format("cannot read the token file {}", endpoint.token_file.string());
  if (endpoint.url.rfind("https://", 0) != 0) return fmt::format("{} is not an https:// URL", kUrlVariable);
  http::Settings settings;
  settings.ca_bundle = endpoint.ca_cert.string();
  settings.connect_timeout = std::chrono::seconds(5);
  settings.stall_timeout = std::chrono::seconds(10);
  http::Request request;
  request.method = "POST";
  request.url = endpoint.url;
  request.headers = {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}};
  request.body = http::text_body(body);
  request.body_size = body.size();
  http::Response response;
  try {
    response = http::Handle(settings).perform(request);
  } catch (const Error& error) {  // libcurl could not start: this thread must not end the process
    return error.what();
  }
  if (response.transport != http::Transport::ok) return response.transport_error;
  if (response.status / 100 == 2) return std::nullopt;
  // The server answers errors with a Kubernetes Status, whose message says why.
  const auto json = nlohmann::json::parse(response.body, nullptr, false);
  const std::string message = json.is_object() && json.contains("message") && json["message"].is_string()
                                  ? json["message"].get<std::string>()
                                  : response.body.substr(0, 200);
  return fmt::format("HTTP {}: {}", response.status, message);
}

}  // namespace

std::optional<TrainerStatusEndpoint> trainer_status_endpoint(
    const std::function<std::optional<std::string>(const std::string&)>& environment) {
  const auto url = environment(kUrlVariable);
  const auto ca = environment(kCaVariable);
  const auto token = environment(kTokenVariable);
  const int set = (url && !url->empty()) + (ca && !ca->empty()) + (token && !token->empty());
  if (set == 3) return TrainerStatusEndpoint{*url, *ca, *token};
  if (set > 0) {
    spdlog::warn("Kubeflow Trainer status: {}, {} and {} must all be set to report progress; not reporting",
                 kUrlVariable, kCaVariable, kTokenVariable);
  }
  return std::nullopt;
}

std::string trainer_status_body(const TrainerProgress& progress, std::time_t now) {
  nlohmann::json status = {{"progressPercentage", std::clamp(progress.percent, 0, 100)},
                           {"lastUpdatedTime", utc_timestamp(now)}};
  if (progress.remaining_seconds) {
    status["estimatedRemainingSeconds"] = std::clamp<std::int64_t>(*progress.remaining_seconds, 0, INT32_MAX);
  }
  nlohmann::json metrics = nlohmann::json::array();
  for (const auto& [name, value] : progress.metrics) {
    if (metrics.size() == kMaxMetrics) break;
    if (name.empty() || value.empty()) continue;
    metrics.push_back({{"name", name.substr(0, kMaxText)}, {"value", value.substr(0, kMaxText)}});
  }
  if (!metrics.empty()) status["metrics"] = metrics;
  return nlohmann::json{{"trainerStatus", status}}.dump();
}

struct TrainerStatusReporter::State {
  TrainerStatusEndpoint endpoint;
  std::chrono::milliseconds interval;
  std::mutex mutex;
  std::condition_variable wake;
  std::optional<TrainerProgress> pending;  // not yet posted
  bool stopping = false;
  bool warned = false;
  std::thread thread;

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    auto next_post = Clock::now();
    while (true) {
      wake.wait_until(lock, next_post, [&] { return stopping; });
      wake.wait(lock, [&] { return pending || stopping; });
      if (!pending) return;  // stopping, nothing left to post
      const std::string body = trainer_status_body(*pending, std::time(nullptr));
      pending.reset();
      lock.unlock();
      const std::optional<std::string> failure = post(endpoint, body);
      lock.lock();
      next_post = Clock::now() + interval;
      if (!failure) continue;
      if (!warned) {
        spdlog::warn("Kubeflow Trainer status: cannot post progress to {}: {}; training goes on, and further "
                     "failures are logged only at debug level",
                     endpoint.url, *failure);
        warned = true;
      } else {
        spdlog::debug("Kubeflow Trainer status: {}", *failure);
      }
    }
  }
};

TrainerStatusReporter::TrainerStatusReporter(TrainerStatusEndpoint endpoint, std::chrono::milliseconds interval)
    : state_(std::make_unique<State>()) {
  state_->endpoint = std::move(endpoint);
  state_->interval = interval;
  state_->thread = std::thread([state = state_.get()] { state->run(); });
}

TrainerStatusReporter::~TrainerStatusReporter() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

void TrainerStatusReporter::report(TrainerProgress progress) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->pending = std::move(progress);
  }
  state_->wake.notify_all();
}

}  // namespace tp::telemetry
