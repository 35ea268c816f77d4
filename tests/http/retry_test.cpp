// The one retry policy (common/retry.h) as HTTP uses it: its schedule, and its loop against Python's
// http.server on loopback with faults injected by tests/s3/fault_proxy.py.
#include "common/retry.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "common/error.h"
#include "echo_server.h"
#include "http/transfer.h"

namespace tp::http {
namespace {

using testing::FaultyEchoServer;

// Fast waits, so that the tests take no longer than the servers' answers.
RetryPolicy fast(int max_attempts) {
  RetryPolicy policy;
  policy.first_wait = std::chrono::milliseconds(5);
  policy.max_wait = std::chrono::milliseconds(20);
  policy.max_attempts = max_attempts;
  return policy;
}

// One attempt at GET `url` as a caller of the policy makes it: a transient failure is returned for
// another try, anything else but a whole 200 answer is permanent.
std::optional<std::string> get_once(Handle& handle, const std::string& url, std::string* body) {
  Request request;
  request.url = url;
  const Response response = handle.perform(request);
  if (response.transport == Transport::transient) return "GET " + url + ": " + response.transport_error;
  if (response.transport != Transport::ok)
    fail(ExitCode::internal, "GET {}: {}", url, response.transport_error);
  if (transient_status(response.status)) return fmt::format("GET {}: HTTP {}", url, response.status);
  if (response.status != 200) fail(ExitCode::data, "GET {}: HTTP {}", url, response.status);
  *body = response.body;
  return std::nullopt;
}

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

class Retry : public ::testing::Test {
 protected:
  void SetUp() override {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  void TearDown() override {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }

  std::ostringstream log_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

TEST(RetryPolicy, TheDefaultsAreTheDocumentedOnes) {
  const RetryPolicy requests;
  EXPECT_EQ(requests.first_wait, std::chrono::milliseconds(200));
  EXPECT_EQ(requests.max_wait, std::chrono::seconds(10));
  EXPECT_EQ(requests.max_attempts, 8);
  EXPECT_EQ(requests.deadline, std::chrono::seconds(0));
  const RetryPolicy operations = RetryPolicy::within(std::chrono::seconds(300));
  EXPECT_EQ(operations.first_wait, requests.first_wait);
  EXPECT_EQ(operations.max_wait, requests.max_wait);
  EXPECT_EQ(operations.max_attempts, 0);
  EXPECT_EQ(operations.deadline, std::chrono::seconds(300));
}

TEST(RetryPolicy, WaitsDoubleFromTheFirstWaitUpToTheCapEachInTheUpperHalfOfItsStep) {
  const RetryPolicy policy;
  const std::int64_t steps[] = {200, 400, 800, 1600, 3200, 6400, 10000, 10000, 10000};
  for (int failed = 1; failed <= 9; ++failed) {
    const std::int64_t step = steps[failed - 1];
    std::int64_t lowest = step;
    std::int64_t highest = 0;
    for (int draw = 0; draw < 2000; ++draw) {
      const std::int64_t wait = backoff(policy, failed).count();
      lowest = std::min(lowest, wait);
      highest = std::max(highest, wait);
    }
    EXPECT_GE(lowest, step / 2) << "after failure " << failed;
    EXPECT_LE(highest, step) << "after failure " << failed;
    // Jitter: the draws spread over the upper half, so ranks that failed together part.
    EXPECT_LT(lowest, step / 2 + step / 10) << "after failure " << failed;
    EXPECT_GT(highest, step - step / 10) << "after failure " << failed;
  }
  EXPECT_LE(backoff(policy, 1000).count(), 10000);  // no overflow far past the cap
}

TEST_F(Retry, TransientFailuresAreTriedAgainUntilTheAnswerComesWhole) {
  FaultyEchoServer server(R"([{"method": "GET", "fault": "503", "times": 1},
                              {"method": "GET", "fault": "429", "times": 1},
                              {"method": "GET", "fault": "reset", "times": 1},
                              {"method": "GET", "fault": "truncate", "times": 1}])");
  Handle handle(Settings{});
  std::string body;
  retry(fast(8), [&] { return get_once(handle, server.url("/blob/50000"), &body); });
  EXPECT_EQ(body.size(), 50000u);
  EXPECT_EQ(server.requests(),
            "GET /blob/50000 - 503\nGET /blob/50000 - 429\nGET /blob/50000 - reset\n"
            "GET /blob/50000 - truncate\nGET /blob/50000 - -\n");
  // Each retry is one warning naming the cause, the retry's number of the most and its wait.
  EXPECT_NE(log_.str().find("/blob/50000: HTTP 503; retry 1/7 in "), std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find("/blob/50000: HTTP 429; retry 2/7 in "), std::string::npos) << log_.str();
  EXPECT_NE(log_.str().find("(curl error 18); retry 4/7 in "), std::string::npos) << log_.str();
}

TEST_F(Retry, GivesUpAfterTheLastAttemptNamingItsCauseInTheNetworkClass) {
  FaultyEchoServer server(R"([{"method": "GET", "fault": "503", "times": -1}])");
  Handle handle(Settings{});
  std::string body;
  try {
    retry(fast(3), [&] { return get_once(handle, server.url("/blob/10"), &body); });
    FAIL() << "a server that always answers 503 was taken for an answer";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::network);
    EXPECT_TRUE(is_retryable(error.code()));
    EXPECT_NE(std::string(error.what()).find("/blob/10: HTTP 503 (gave up after 3 attempts)"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(count_lines(server.requests()), 3u) << server.requests();
  EXPECT_EQ(count_lines(log_.str()), 2u) << log_.str();
}

TEST_F(Retry, ADeadlineBoundsTheTriesInsteadOfACount) {
  FaultyEchoServer server(R"([{"method": "GET", "fault": "503", "times": -1}])");
  Handle handle(Settings{});
  RetryPolicy policy = RetryPolicy::within(std::chrono::seconds(1));
  policy.first_wait = std::chrono::milliseconds(20);
  policy.max_wait = std::chrono::milliseconds(100);
  std::string body;
  try {
    retry(policy, [&] { return get_once(handle, server.url("/blob/10"), &body); });
    FAIL() << "a server that always answers 503 was taken for an answer";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::network);
    EXPECT_NE(std::string(error.what()).find("HTTP 503 (gave up after "), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(" attempts within 1s)"), std::string::npos) << error.what();
  }
  EXPECT_GE(count_lines(server.requests()), 2u) << server.requests();
  EXPECT_NE(log_.str().find("; retry 1 in "), std::string::npos) << log_.str();
}

TEST_F(Retry, APermanentFailureEndsAtOnce) {
  FaultyEchoServer server;
  Handle handle(Settings{});
  std::string body;
  try {
    retry(fast(8), [&] { return get_once(handle, server.url("/missing"), &body); });
    FAIL() << "a 404 was taken for an answer";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_EQ(std::string(error.what()).find("gave up"), std::string::npos) << error.what();
  }
  EXPECT_EQ(server.requests(), "GET /missing - -\n");
  EXPECT_EQ(log_.str(), "");
}

TEST_F(Retry, NetworkErrorsAreTriedAgainAndOtherErrorsPassThrough) {
  FaultyEchoServer server(R"([{"method": "GET", "fault": "503", "times": 2}])");
  Handle handle(Settings{});
  // As git's fetches and LFS report a transient failure: an error of class network.
  auto fetch = [&](const std::string& path) {
    std::string body;
    if (auto failure = get_once(handle, server.url(path), &body)) fail(ExitCode::network, "{}", *failure);
  };
  retry_network_errors(fast(8), [&] { fetch("/blob/10"); });
  EXPECT_EQ(count_lines(server.requests()), 3u) << server.requests();

  int calls = 0;
  try {
    retry_network_errors(fast(8), [&] {
      ++calls;
      fail(ExitCode::source, "repository not found");
    });
    FAIL() << "a source error was swallowed";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::source);
    EXPECT_STREQ(error.what(), "repository not found");
  }
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tp::http
