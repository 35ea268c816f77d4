// Test servers for the S3 suite: s3rver (npm) on a free loopback port; support/fault_proxy.h puts a
// fault-injecting proxy in front of it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "s3/client.h"
#include "support/background_process.h"
#include "support/fault_proxy.h"
#include "support/temp_dir.h"

namespace tp::testing {

class S3Server {
 public:
  static constexpr const char* kBucket = "test-bucket";
  // With `tls`, serves HTTPS with a self-signed certificate for 127.0.0.1 (its PEM is certificate()).
  explicit S3Server(bool tls = false);
  std::string endpoint() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }
  std::filesystem::path certificate() const { return directory_.path() / "cert.pem"; }
  int port() const { return port_; }
  const std::filesystem::path& data_dir() const { return data_dir_; }

 private:
  std::string tls_options() const;  // creates the certificate

  TempDir directory_;
  bool tls_;
  std::filesystem::path data_dir_;
  int port_;
  BackgroundProcess process_;
};

// A client of `endpoint` with s3rver's keys and retries fast enough for tests.
s3::Connection test_connection(const std::string& endpoint);
s3::TransferSettings fast_retries();

}  // namespace tp::testing
