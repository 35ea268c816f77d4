#include "telemetry/status_server.h"

#include <fstream>
#include <stdexcept>

#include "support/process.h"

namespace tp::testing {
namespace {

// A CA, and a server certificate for 127.0.0.1 signed by it; another CA that signed nothing here.
void make_certificates(const std::filesystem::path& dir) {
  const std::string d = shell_quote(dir.string()) + "/";
  const std::string quiet = " 2>/dev/null";
  for (const char* ca : {"ca", "other-ca"}) {
    run_checked("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-" + std::string(ca) + " -keyout " +
                d + ca + ".key -out " + d + ca + ".pem" + quiet);
  }
  write_text(dir / "san.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  run_checked("openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout " + d + "server.key -out " + d +
              "server.csr" + quiet);
  run_checked("openssl x509 -req -in " + d + "server.csr -CA " + d + "ca.pem -CAkey " + d + "ca.key -CAcreateserial" +
              " -days 2 -extfile " + d + "san.cnf -out " + d + "server.pem" + quiet);
}

std::string status_path() {
  return std::string("/apis/trainer.kubeflow.org/v1alpha1/namespaces/") + TrainerStatusServer::kNamespace +
         "/trainjobs/" + TrainerStatusServer::kJob + "/status";
}

std::string start(const std::filesystem::path& dir, int port, bool fail) {
  make_certificates(dir);
  write_text(dir / "token", "test-token-of-the-pod\n");  // kubelet's files end without one; either is fine
  return "python3 " + shell_quote(source_dir() + "/tests/telemetry/status_server.py") +
         " --port " + std::to_string(port) + " --cert " + shell_quote((dir / "server.pem").string()) + " --key " +
         shell_quote((dir / "server.key").string()) + " --token test-token-of-the-pod --path " +
         shell_quote(status_path()) + " --log " + shell_quote((dir / "requests.jsonl").string()) +
         (fail ? " --fail" : "");
}

}  // namespace

TrainerStatusServer::TrainerStatusServer(bool fail)
    : port_(free_port()), process_(start(dir_.path(), port_, fail), dir_ / "server.log") {
  try {
    wait_for_port(port_);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string(error.what()) + ": status_server.py said: " + process_.log());
  }
}

std::string TrainerStatusServer::url() const {
  return "https://127.0.0.1:" + std::to_string(port_) + status_path();
}

std::string TrainerStatusServer::environment() const {
  return "env KUBEFLOW_TRAINER_SERVER_URL=" + shell_quote(url()) +
         " KUBEFLOW_TRAINER_SERVER_CA_CERT=" + shell_quote(ca_cert().string()) +
         " KUBEFLOW_TRAINER_SERVER_TOKEN=" + shell_quote(token_file().string()) + " ";
}

std::vector<nlohmann::json> TrainerStatusServer::accepted() const {
  std::vector<nlohmann::json> statuses;
  std::ifstream in(dir_ / "requests.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto entry = nlohmann::json::parse(line, nullptr, false);  // the last line may be half written
    if (entry.is_object() && entry.contains("trainerStatus")) statuses.push_back(entry["trainerStatus"]);
  }
  return statuses;
}

std::vector<std::string> TrainerStatusServer::rejected() const {
  std::vector<std::string> reasons;
  std::ifstream in(dir_ / "requests.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto entry = nlohmann::json::parse(line, nullptr, false);
    if (entry.is_object() && entry.contains("rejected")) reasons.push_back(entry["rejected"].get<std::string>());
  }
  return reasons;
}

}  // namespace tp::testing
