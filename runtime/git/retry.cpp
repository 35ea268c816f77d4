#include "git/retry.h"

#include <spdlog/spdlog.h>

#include <random>
#include <thread>

#include "common/error.h"

namespace tp::git {

void retry_transient(const std::string& what, std::chrono::seconds timeout,
                     const std::function<void()>& attempt) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  std::chrono::milliseconds backoff{1000};
  std::minstd_rand jitter(std::random_device{}());
  for (int attempts = 1;; ++attempts) {
    try {
      attempt();
      return;
    } catch (const Error& error) {
      if (error.code() != ExitCode::network) throw;
      // Up to 20% jitter, so ranks that failed together do not retry in lockstep.
      const auto wait = backoff + std::chrono::milliseconds(jitter() % (backoff.count() / 5 + 1));
      if (Clock::now() + wait > deadline) {
        fail(ExitCode::network, "{} (gave up after {} attempt{} within {}s)", error.what(), attempts,
             attempts == 1 ? "" : "s", timeout.count());
      }
      spdlog::warn("{} failed (attempt {}), retrying in {:.1f}s: {}", what, attempts, wait.count() / 1000.0,
                   error.what());
      std::this_thread::sleep_for(wait);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(30000));
    }
  }
}

}  // namespace tp::git
