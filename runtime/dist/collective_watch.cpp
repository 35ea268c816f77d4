#include "dist/collective_watch.h"

#include <fmt/format.h>

namespace tp::dist {

void CollectiveWatch::add(Phase what, Clock::time_point started, Poll poll) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.push_back({what, started, std::move(poll)});
}

CollectiveWatch::Inspection CollectiveWatch::inspect(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  Inspection inspection;
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    const Status status = it->poll();
    if (!status.error.empty()) {
      if (!inspection.failure) inspection.failure = Failure{it->what, status.error};
    } else if (!status.finished && now - it->started > timeout_) {
      if (!inspection.failure) {
        const double seconds = std::chrono::duration<double>(now - it->started).count();
        inspection.failure = Failure{it->what, fmt::format("not finished after {:.1f}s (dist.timeout_s = {})",
                                                           seconds, timeout_.count())};
      }
    }
    if (status.finished && status.error.empty()) {
      it = in_flight_.erase(it);
      continue;
    }
    if (!status.finished && !inspection.oldest) inspection.oldest = Running{it->what, it->started};
    ++it;
  }
  return inspection;
}

}  // namespace tp::dist
