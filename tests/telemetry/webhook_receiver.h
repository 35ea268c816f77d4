// A webhook on loopback for the notification tests (webhook_receiver.py): a secret path, a format it checks
// (json, slack or teams), optionally a few 503 answers first, and the bodies it accepted.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "support/background_process.h"
#include "support/temp_dir.h"

namespace tp::testing {

class WebhookReceiver {
 public:
  // The secret part of the URL, which must never appear in a log.
  static constexpr const char* kSecret = "XXsecret-hook-tokenXX";
  WebhookReceiver(const std::string& format, int fail_first = 0);

  std::string url() const;  // TRAINPOINT_NOTIFY_WEBHOOK
  // The bodies accepted so far, in order.
  std::vector<nlohmann::json> accepted() const;
  // Why bodies were refused, in order.
  std::vector<std::string> rejected() const;

 private:
  TempDir dir_;
  int port_;
  BackgroundProcess process_;
};

}  // namespace tp::testing
