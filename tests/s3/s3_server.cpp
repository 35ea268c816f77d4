#include "s3_server.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include "support/process.h"

namespace tp::testing {
namespace {

std::filesystem::path go_tool(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(TP_GO_TOOLS_BIN) / name;
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error(path.string() + " was not found: the S3 tests run MinIO, which " +
                             "scripts/install-go-tools builds (scripts/test runs it)");
  }
  return path;
}

}  // namespace

void S3Server::make_certificate() const {
  std::filesystem::create_directories(certificate().parent_path());
  run_checked(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
      "subjectAltName=IP:127.0.0.1 -keyout " +
      shell_quote((certificate().parent_path() / "private.key").string()) + " -out " +
      shell_quote(certificate().string()) + " 2>/dev/null");
}

S3Server::S3Server(bool tls)
    : tls_(tls),
      data_dir_([&] {
        std::filesystem::create_directories(directory_.path() / "data");
        if (tls) make_certificate();
        return directory_.path() / "data";
      }()),
      port_(free_port()),
      // Its own HOME, no console, no update checks; TLS from --certs-dir (public.crt, private.key).
      process_("env HOME=" + shell_quote(directory_.path().string()) + " MINIO_ROOT_USER=" + kAccessKey +
                   " MINIO_ROOT_PASSWORD=" + kSecretKey + " MINIO_BROWSER=off MINIO_UPDATE=off " +
                   shell_quote(go_tool("minio").string()) + " server --quiet --address 127.0.0.1:" +
                   std::to_string(port_) + " --console-address 127.0.0.1:" + std::to_string(free_port()) +
                   " --certs-dir " + shell_quote((directory_.path() / "certs").string()) + " " +
                   shell_quote(data_dir_.string()),
               directory_.path() / "minio.log") {
  wait_for_port(port_);
  // MinIO accepts connections before it serves requests (503 XMinioServerNotInitialized): retry the
  // bucket's creation until it is ready.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    const CommandResult made = run_command(mc(std::string("mb --ignore-existing tp/") + kBucket));
    if (made.exit_code == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("MinIO on port " + std::to_string(port_) + " did not create the bucket: " +
                               made.output + "\nMinIO's log:\n" + process_.log());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::string S3Server::key_environment() {
  return std::string("AWS_ACCESS_KEY_ID=") + kAccessKey + " AWS_SECRET_ACCESS_KEY=" + kSecretKey;
}

std::string S3Server::mc(const std::string& arguments) const {
  const std::string host = std::string(tls_ ? "https" : "http") + "://" + kAccessKey + ":" + kSecretKey +
                           "@127.0.0.1:" + std::to_string(port_);
  return "env MC_CONFIG_DIR=" + shell_quote((directory_.path() / "mc").string()) + " MC_HOST_tp=" +
         shell_quote(host) + " " + shell_quote(go_tool("mc").string()) + " --quiet --no-color" +
         (tls_ ? " --insecure " : " ") + arguments + " 2>&1";
}

s3::Connection test_connection(const std::string& endpoint) {
  s3::Connection connection;
  connection.endpoint = endpoint;
  connection.endpoint_source = "test";
  connection.region = "us-east-1";
  connection.path_style = true;
  connection.credentials = {S3Server::kAccessKey, S3Server::kSecretKey, "", "test"};
  return connection;
}

s3::TransferSettings fast_retries() {
  s3::TransferSettings settings;
  settings.parallelism = 4;
  settings.retry.max_attempts = 5;
  settings.retry.first_wait = std::chrono::milliseconds(5);
  settings.retry.max_wait = std::chrono::milliseconds(50);
  settings.http.stall_timeout = std::chrono::seconds(1);
  return settings;
}

}  // namespace tp::testing
