#include "package_index.h"

#include <fstream>

#include "support/process.h"

namespace tp::testing {

PackageIndex::PackageIndex(const std::filesystem::path& log_file) : port_(free_port()), log_file_(log_file) {
  server_ = std::make_unique<BackgroundProcess>(
      "/usr/bin/python3 -m http.server --bind 127.0.0.1 --directory " + shell_quote(TP_TEST_PACKAGE_INDEX) +
          " " + std::to_string(port_),
      log_file_);
  wait_for_port(port_);
}

std::string PackageIndex::url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/simple"; }

void PackageIndex::stop() { server_.reset(); }

int PackageIndex::requests(const std::string& part) const {
  std::ifstream in(log_file_);
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"GET ") != std::string::npos && line.find(part) != std::string::npos) ++count;
  }
  return count;
}

}  // namespace tp::testing
