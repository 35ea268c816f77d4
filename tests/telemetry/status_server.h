// Kubeflow Trainer's TrainJob status endpoint for tests (status_server.py): HTTPS on a loopback port with a
// certificate signed by a CA made for the test, a token file, and the bodies it accepted.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "support/background_process.h"
#include "support/temp_dir.h"

namespace tp::testing {

class TrainerStatusServer {
 public:
  static constexpr const char* kNamespace = "team-a";
  static constexpr const char* kJob = "shapes";
  // `fail`: every request is answered 500.
  explicit TrainerStatusServer(bool fail = false);

  std::string url() const;                                       // KUBEFLOW_TRAINER_SERVER_URL
  std::filesystem::path ca_cert() const { return dir_ / "ca.pem"; }  // KUBEFLOW_TRAINER_SERVER_CA_CERT
  std::filesystem::path token_file() const { return dir_ / "token"; }  // KUBEFLOW_TRAINER_SERVER_TOKEN
  // A CA that did not sign the server's certificate.
  std::filesystem::path other_ca_cert() const { return dir_ / "other-ca.pem"; }
  // The `env` prefix of a command that reports to this server.
  std::string environment() const;

  // The trainerStatus objects accepted so far, in order.
  std::vector<nlohmann::json> accepted() const;
  // Why requests were refused (bad token, path or body), in order.
  std::vector<std::string> rejected() const;

 private:
  TempDir dir_;
  int port_;
  BackgroundProcess process_;
};

}  // namespace tp::testing
