// tests/http's servers on loopback: echo_server.py (Python's http.server), and the fault proxy
// (support/fault_proxy.h) in front of it.
#pragma once

#include <string>

#include "support/background_process.h"
#include "support/fault_proxy.h"
#include "support/temp_dir.h"

namespace tp::testing {

class EchoServer {
 public:
  EchoServer();
  int port() const { return port_; }

 private:
  TempDir directory_;
  int port_;
  BackgroundProcess process_;
};

// An echo server behind a fault proxy with `rules_json` (tests/s3/fault_proxy.py's rules).
class FaultyEchoServer {
 public:
  explicit FaultyEchoServer(const std::string& rules_json = "[]") : proxy_(echo_.port(), rules_json) {}
  std::string url(const std::string& path) const { return proxy_.endpoint() + path; }
  // One line per request the proxy saw: "METHOD PATH RANGE FAULT".
  std::string requests() const { return proxy_.requests(); }

 private:
  EchoServer echo_;
  FaultProxy proxy_;
};

}  // namespace tp::testing
