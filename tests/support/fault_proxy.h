// An HTTP proxy that injects faults (error answers, resets, truncated or stalled bodies, corruption) in front
// of a server on loopback: tests/s3/fault_proxy.py, which scripts/fault-suite runs too. Used by the S3 and
// HTTP tests.
#pragma once

#include <string>

#include "support/background_process.h"
#include "support/temp_dir.h"

namespace tp::testing {

// Forwards to `upstream_port`; `rules_json` is a JSON list of faults (see fault_proxy.py). The proxy's
// random choices are seeded: the same requests fail in every run of a test.
class FaultProxy {
 public:
  FaultProxy(int upstream_port, const std::string& rules_json);
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // One line per request seen: "METHOD PATH RANGE FAULT".
  std::string requests() const;

 private:
  TempDir directory_;
  int port_;
  BackgroundProcess process_;
};

}  // namespace tp::testing
