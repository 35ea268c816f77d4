// LD_PRELOAD library for the clock-skew test: time() returns the real time plus TP_CLOCK_SKEW_SECONDS,
// so that a process signs its S3 requests with a clock that is off.
#include <cstdlib>
#include <ctime>

extern "C" time_t time(time_t* result) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const char* skew = std::getenv("TP_CLOCK_SKEW_SECONDS");
  const time_t shifted = now.tv_sec + (skew ? std::atol(skew) : 0);
  if (result) *result = shifted;
  return shifted;
}
