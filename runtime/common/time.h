// Times as people and APIs read them.
#pragma once

#include <ctime>
#include <string>

namespace tp {

// `time` in UTC, written by strftime's `format` (at most 63 characters long once written).
std::string format_utc(std::time_t time, const char* format);

// `time` in UTC as RFC 3339 to the second, such as "2026-12-01T14:02:11Z".
std::string utc_timestamp(std::time_t time = std::time(nullptr));

}  // namespace tp
