#include "support/captured_log.h"

#include <spdlog/sinks/ostream_sink.h>

namespace tp::testing {

CapturedLog::CapturedLog() : previous_(spdlog::default_logger()) {
  auto logger = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(text_));
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

CapturedLog::~CapturedLog() { spdlog::set_default_logger(previous_); }

int CapturedLog::count(const std::string& words) const {
  const std::string text = text_.str();
  int n = 0;
  for (auto at = text.find(words); at != std::string::npos; at = text.find(words, at + 1)) ++n;
  return n;
}

}  // namespace tp::testing
