// Retrying transient failures (tp::Error of class ExitCode::network) with exponential backoff.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace tp::git {

// Runs `attempt` until it succeeds, throws an error that is not of class network, or `timeout` has
// passed since the first try; waits 1 s, 2 s, 4 s... (at most 30 s) between tries. The last
// error is rethrown with the number of attempts added to its message.
void retry_transient(const std::string& what, std::chrono::seconds timeout,
                     const std::function<void()>& attempt);

}  // namespace tp::git
