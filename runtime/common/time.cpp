#include "common/time.h"

namespace tp {

std::string format_utc(std::time_t time, const char* format) {
  std::tm utc{};
  gmtime_r(&time, &utc);
  char text[64];
  return std::string(text, std::strftime(text, sizeof text, format, &utc));
}

std::string utc_timestamp(std::time_t time) { return format_utc(time, "%Y-%m-%dT%H:%M:%SZ"); }

}  // namespace tp
