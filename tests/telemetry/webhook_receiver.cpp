#include "telemetry/webhook_receiver.h"

#include <fstream>
#include <stdexcept>

#include "support/process.h"

namespace tp::testing {
namespace {

const std::string kPath = std::string("/services/T0/B0/") + WebhookReceiver::kSecret;

std::string start(const std::filesystem::path& dir, int port, const std::string& format, int fail_first) {
  return "python3 " + shell_quote(source_dir() + "/tests/telemetry/webhook_receiver.py") + " --port " +
         std::to_string(port) + " --path " + shell_quote(kPath) + " --format " + format + " --log " +
         shell_quote((dir / "requests.jsonl").string()) + " --fail-first " + std::to_string(fail_first);
}

std::vector<nlohmann::json> entries(const std::filesystem::path& log) {
  std::vector<nlohmann::json> found;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) found.push_back(nlohmann::json::parse(line));
  return found;
}

}  // namespace

WebhookReceiver::WebhookReceiver(const std::string& format, int fail_first)
    : port_(free_port()), process_(start(dir_.path(), port_, format, fail_first), dir_ / "receiver.log") {
  try {
    wait_for_port(port_);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string(error.what()) + ": webhook_receiver.py said: " + process_.log());
  }
}

std::string WebhookReceiver::url() const { return "http://127.0.0.1:" + std::to_string(port_) + kPath; }

std::vector<nlohmann::json> WebhookReceiver::accepted() const {
  std::vector<nlohmann::json> bodies;
  for (const auto& entry : entries(dir_ / "requests.jsonl")) {
    if (entry.contains("body")) bodies.push_back(entry["body"]);
  }
  return bodies;
}

std::vector<std::string> WebhookReceiver::rejected() const {
  std::vector<std::string> reasons;
  for (const auto& entry : entries(dir_ / "requests.jsonl")) {
    if (entry.contains("rejected")) reasons.push_back(entry["rejected"].get<std::string>());
  }
  return reasons;
}

}  // namespace tp::testing
