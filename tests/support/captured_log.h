// What the process logs (spdlog's default logger, at info and above) while a CapturedLog lives, for tests
// that check what a user's log says and what it does not.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>

namespace tp::testing {

class CapturedLog {
 public:
  CapturedLog();
  ~CapturedLog();
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;

  // How often `words` occur in what was logged (a level shows as "[warning]", "[error]", "[info]").
  int count(const std::string& words) const;
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace tp::testing
