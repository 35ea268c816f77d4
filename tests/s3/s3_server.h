// The S3 server of the tests: MinIO (scripts/install-go-tools builds it) on a free loopback port with a
// fresh data directory and one bucket; support/fault_proxy.h puts a fault-injecting proxy in front of it.
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
  // The server's root user; tests make other users with mc().
  static constexpr const char* kAccessKey = "trainpoint-test";
  static constexpr const char* kSecretKey = "trainpoint-test-secret";

  // With `tls`, serves HTTPS with a self-signed certificate for 127.0.0.1 (its PEM is certificate()).
  explicit S3Server(bool tls = false);
  std::string endpoint() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
  }
  std::filesystem::path certificate() const { return directory_.path() / "certs" / "public.crt"; }
  int port() const { return port_; }
  // Where MinIO keeps a bucket's objects: data_dir() / bucket holds one folder per key.
  const std::filesystem::path& data_dir() const { return data_dir_; }
  // "AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...", the root user's keys for a command line.
  static std::string key_environment();
  // A shell command running MinIO's client `mc` with ARGUMENTS, where the alias `tp` is this server as
  // its root user (for example mc("mb tp/other"), mc("admin user add tp NAME SECRET")).
  std::string mc(const std::string& arguments) const;

 private:
  void make_certificate() const;

  TempDir directory_;
  bool tls_;
  std::filesystem::path data_dir_;
  int port_;
  BackgroundProcess process_;
};

// A client of `endpoint` with the test server's root keys and retries fast enough for tests.
s3::Connection test_connection(const std::string& endpoint);
s3::TransferSettings fast_retries();

}  // namespace tp::testing
