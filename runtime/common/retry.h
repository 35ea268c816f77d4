// The one retry policy of trainpoint's network operations: S3 requests, git fetches, Git LFS transfers, MLflow
// calls and the rendezvous with the master (docs/reliability.md, "Retries"). Its parameters are the defaults
// of RetryPolicy below.
//
// An attempt that fails transiently (the caller says which: for HTTP, Transport::transient and
// transient_status in http/transfer.h) is tried again after a wait; any other failure ends at once. The
// waits double from `first_wait` up to `max_wait`; each is drawn uniformly from the upper half of its step
// (200-400 ms after the second failure, 5-10 s once capped), so ranks that failed together do not retry
// in lockstep. The policy gives up after `max_attempts` attempts, or, with a `deadline`, when the next
// wait would end more than `deadline` after the first attempt began, whichever comes first.
#pragma once

#include <spdlog/common.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace tp {

struct RetryPolicy {
  std::chrono::milliseconds first_wait{200};
  std::chrono::milliseconds max_wait{10'000};
  int max_attempts = 8;              // including the first; 0: no limit (then a deadline bounds it)
  std::chrono::seconds deadline{0};  // 0: none
  // Where waiting is expected (a worker that starts before its master), each retry's line is info, not warning.
  spdlog::level::level_enum retry_log_level = spdlog::level::warn;

  // No attempt limit: tried again until `deadline` has passed (git's --git-timeout).
  static RetryPolicy within(std::chrono::seconds deadline);
};

// The wait after the `failed_attempts`-th failure (1 after the first), with its jitter.
std::chrono::milliseconds backoff(const RetryPolicy& policy, int failed_attempts);

// Runs `attempt` until it returns no failure. A returned failure (a sentence that names what failed and
// why) is transient: logged as a warning, "<failure>; retry 1/7 in 150 ms", and tried again after
// backoff() until the policy gives up with tp::Error(network) "<last failure> (gave up after N attempts)"
// (with a deadline: "... within Ts)"). An exception from `attempt` propagates at once.
void retry(const RetryPolicy& policy, const std::function<std::optional<std::string>()>& attempt);

// retry() for code that reports its transient failures as tp::Error of class network (libgit2, LFS):
// those are tried again; any other exception propagates at once.
void retry_network_errors(const RetryPolicy& policy, const std::function<void()>& attempt);

}  // namespace tp
