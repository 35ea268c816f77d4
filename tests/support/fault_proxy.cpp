#include "support/fault_proxy.h"

#include <fstream>
#include <sstream>

#include "support/process.h"

namespace tp::testing {

FaultProxy::FaultProxy(int upstream_port, const std::string& rules_json)
    : port_(free_port()),
      process_(
          [&] {
            write_text(directory_.path() / "rules.json", rules_json);
            // Seeded, so that a rule's "probability" picks the same requests in every run of a test.
            return "env FAULT_PROXY_SEED=7 python3 " + shell_quote(source_dir() + "/tests/s3/fault_proxy.py") + " " +
                   std::to_string(port_) + " " + std::to_string(upstream_port) + " " +
                   shell_quote((directory_.path() / "rules.json").string()) + " " +
                   shell_quote((directory_.path() / "requests.log").string());
          }(),
          directory_.path() / "proxy.log") {
  wait_for_port(port_);
}

std::string FaultProxy::requests() const {
  std::ifstream in(directory_.path() / "requests.log");
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace tp::testing
