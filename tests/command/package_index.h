// A real PEP 503 package index on loopback for the command-mode tests: `python3 -m http.server` over
// the directory make_package_index.sh built (wheels made with pip wheel from packages/, and sdists).
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "support/background_process.h"

namespace tp::testing {

class PackageIndex {
 public:
  // Serves the index; the server's request log goes to `log_file`.
  explicit PackageIndex(const std::filesystem::path& log_file);
  // "http://127.0.0.1:PORT/simple"
  std::string url() const;
  // Stops the server: its port then refuses connections.
  void stop();
  // How many requests the server logged whose path contains `part`.
  int requests(const std::string& part) const;

 private:
  int port_;
  std::filesystem::path log_file_;
  std::unique_ptr<BackgroundProcess> server_;
};

}  // namespace tp::testing
