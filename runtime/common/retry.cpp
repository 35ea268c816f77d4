#include "common/retry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <thread>

#include "common/error.h"

namespace tp {
namespace {

std::string describe_wait(std::chrono::milliseconds wait) {
  return wait.count() < 1000 ? fmt::format("{} ms", wait.count())
                             : fmt::format("{:.1f} s", wait.count() / 1000.0);
}

}  // namespace

RetryPolicy RetryPolicy::within(std::chrono::seconds deadline) {
  RetryPolicy policy;
  policy.max_attempts = 0;
  policy.deadline = deadline;
  return policy;
}

std::chrono::milliseconds backoff(const RetryPolicy& policy, int failed_attempts) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const std::int64_t step = std::min<std::int64_t>(
      policy.max_wait.count(), policy.first_wait.count() << std::clamp(failed_attempts - 1, 0, 20));
  return std::chrono::milliseconds(std::uniform_int_distribution<std::int64_t>(step / 2, step)(random));
}

void retry(const RetryPolicy& policy, const std::function<std::optional<std::string>()>& attempt) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + policy.deadline;
  for (int attempts = 1;; ++attempts) {
    const std::optional<std::string> failure = attempt();
    if (!failure) return;
    const auto wait = backoff(policy, attempts);
    const bool out_of_attempts = policy.max_attempts > 0 && attempts >= policy.max_attempts;
    const bool out_of_time = policy.deadline.count() > 0 && Clock::now() + wait > deadline;
    if (out_of_attempts || out_of_time) {
      fail(ExitCode::network, "{} (gave up after {} attempt{}{})", *failure, attempts,
           attempts == 1 ? "" : "s",
           policy.deadline.count() > 0 ? fmt::format(" within {}s", policy.deadline.count()) : "");
    }
    spdlog::log(policy.retry_log_level, "{}; retry {}{} in {}", *failure, attempts,
                 policy.max_attempts > 0 ? fmt::format("/{}", policy.max_attempts - 1) : "",
                 describe_wait(wait));
    std::this_thread::sleep_for(wait);
  }
}

void retry_network_errors(const RetryPolicy& policy, const std::function<void()>& attempt) {
  retry(policy, [&]() -> std::optional<std::string> {
    try {
      attempt();
      return std::nullopt;
    } catch (const Error& error) {
      if (error.code() != ExitCode::network) throw;
      return std::string(error.what());
    }
  });
}

}  // namespace tp
