#include "s3_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "support/process.h"

namespace tp::testing {


std::string S3Server::tls_options() const {
  if (!tls_) return "";
  const std::string key = (directory_.path() / "key.pem").string();
  run_checked(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 -addext "
      "subjectAltName=IP:127.0.0.1"
      " -keyout " +
      shell_quote(key) + " -out " + shell_quote(certificate().string()));
  return " --key " + shell_quote(key) + " --cert " + shell_quote(certificate().string());
}

S3Server::S3Server(bool tls)
    : tls_(tls),
      data_dir_([&] {
        std::filesystem::create_directories(directory_.path() / "data");
        return directory_.path() / "data";
      }()),
      port_(free_port()),
      process_(
          // The legacy provider lets s3rver build continuation tokens (DES) on Node 20: paginated listings.
          "env NODE_OPTIONS=--openssl-legacy-provider " +
              shell_quote(source_dir() + "/.deps/npm/node_modules/.bin/s3rver") + " -d " +
              shell_quote(data_dir_.string()) + " -a 127.0.0.1 -p " + std::to_string(port_) +
              " --configure-bucket " + kBucket + " --silent" + tls_options(),
          directory_.path() / "s3rver.log") {
  wait_for_port(port_);
}

s3::Connection test_connection(const std::string& endpoint) {
  s3::Connection connection;
  connection.endpoint = endpoint;
  connection.endpoint_source = "test";
  connection.region = "us-east-1";
  connection.path_style = true;
  connection.credentials = {"S3RVER", "S3RVER", "", "test"};
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
