// CPU time for the benchmarks' "per CPU-second" figures.
#pragma once

#include <ctime>

namespace tp::bench {

// User and system time of every thread of this process so far.
inline double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

}  // namespace tp::bench
