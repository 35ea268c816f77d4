// http::Handle against Python's http.server on loopback (echo_server.py), faults injected by
// tests/s3/fault_proxy.py: what arrives where, and how each kind of transport failure is classified.
#include "http/transfer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "echo_server.h"

namespace tp::http {
namespace {

using testing::FaultyEchoServer;

// Byte i of echo_server.py's /blob/N.
std::string blob(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i % 251);
  return bytes;
}

Request get(const std::string& url, std::string* received) {
  Request request;
  request.url = url;
  request.sink = [received](const Response&, const char* data, std::size_t size) {
    received->append(data, size);
    return true;
  };
  return request;
}

TEST(Transfer, ASuccessfulBodyGoesToTheSinkAndAnErrorBodyIsKeptForItsText) {
  FaultyEchoServer server;
  Handle handle(Settings{});
  std::string received;
  const Response found = handle.perform(get(server.url("/blob/300000"), &received));
  EXPECT_EQ(found.transport, Transport::ok) << found.transport_error;
  EXPECT_EQ(found.status, 200);
  EXPECT_TRUE(received == blob(300000));
  EXPECT_EQ(found.sink_bytes, 300000u);
  EXPECT_EQ(found.header("content-length"), "300000");  // names in lower case
  EXPECT_TRUE(found.body.empty());

  received.clear();
  const Response missing = handle.perform(get(server.url("/nothing"), &received));
  EXPECT_EQ(missing.transport, Transport::ok);
  EXPECT_EQ(missing.status, 404);
  EXPECT_TRUE(received.empty());
  EXPECT_EQ(missing.body, "no such thing\n");
}

TEST(Transfer, AnUploadIsReadAgainFromItsStartWhenARedirectSendsItElsewhere) {
  FaultyEchoServer server;
  Handle handle(Settings{});
  const std::string text = blob(200000);
  for (const std::string method : {"PUT", "POST"}) {
    Request request;
    request.method = method;
    request.url = server.url("/redirect/echo");
    request.body = text_body(text);
    request.body_size = text.size();
    const Response stayed = handle.perform(request);
    EXPECT_EQ(stayed.status, 307) << method;
    EXPECT_EQ(stayed.header("location"), "/echo") << method;

    request.follow_redirects = true;
    const Response followed = handle.perform(request);
    EXPECT_EQ(followed.transport, Transport::ok) << followed.transport_error;
    EXPECT_EQ(followed.status, 200) << method;
    EXPECT_EQ(followed.header("x-seen-method"), method);
    EXPECT_TRUE(followed.body == text) << method << ": " << followed.body.size() << " bytes came back";
  }
}

TEST(Transfer, SendsBasicCredentialsWhenGivenAndAnAcceptHeaderOnlyWhenAsked) {
  FaultyEchoServer server;
  Handle handle(Settings{});
  Request request;
  request.method = "POST";
  request.url = server.url("/echo");
  request.body = text_body("{}");
  request.body_size = 2;
  const Response plain = handle.perform(request);
  EXPECT_EQ(plain.header("x-seen-authorization"), "");
  EXPECT_EQ(plain.header("x-seen-accept"), "");
  EXPECT_EQ(plain.body, "{}");

  request.basic_auth.emplace("user", "secret");
  request.headers = {{"Accept", "application/vnd.git-lfs+json"}};
  const Response authenticated = handle.perform(request);
  EXPECT_EQ(authenticated.header("x-seen-authorization"), "Basic dXNlcjpzZWNyZXQ=");
  EXPECT_EQ(authenticated.header("x-seen-accept"), "application/vnd.git-lfs+json");
}

TEST(Transfer, NoAnswerOrACutOneIsTransient) {
  FaultyEchoServer server(R"([{"method": "GET", "fault": "reset", "times": 1},
                              {"method": "GET", "fault": "truncate", "times": 1},
                              {"method": "GET", "fault": "stall", "times": 1}])");
  Settings settings;
  settings.stall_timeout = std::chrono::seconds(1);
  Handle handle(settings);
  for (const char* fault : {"reset", "truncate", "stall"}) {
    std::string received;
    const Response cut = handle.perform(get(server.url("/blob/100000"), &received));
    EXPECT_EQ(cut.transport, Transport::transient) << fault;
    EXPECT_NE(cut.transport_error.find("(curl error "), std::string::npos) << cut.transport_error;
  }
  std::string received;
  EXPECT_EQ(handle.perform(get(server.url("/blob/100000"), &received)).transport, Transport::ok);
  EXPECT_TRUE(received == blob(100000));
  EXPECT_NE(server.requests().find("GET /blob/100000 - stall"), std::string::npos) << server.requests();

  Request refused;
  refused.url = "http://127.0.0.1:" + std::to_string(testing::free_port()) + "/";
  EXPECT_EQ(handle.perform(refused).transport, Transport::transient);
}

TEST(Transfer, FailuresOnTheCallersSideAreTheirOwnKind) {
  FaultyEchoServer server;
  Handle handle(Settings{});
  Request bad_url;
  bad_url.url = "nope://127.0.0.1/";
  EXPECT_EQ(handle.perform(bad_url).transport, Transport::bad_url);

  std::string received;
  const std::atomic<bool> cancel{true};
  EXPECT_EQ(handle.perform(get(server.url("/blob/1000"), &received), &cancel).transport,
            Transport::cancelled);

  Request refusing = get(server.url("/blob/1000"), &received);
  refusing.sink = [](const Response&, const char*, std::size_t) { return false; };
  EXPECT_EQ(handle.perform(refusing).transport, Transport::sink_refused);

  Request unreadable;
  unreadable.method = "PUT";
  unreadable.url = server.url("/echo");
  unreadable.body = [](char*, std::size_t, std::uint64_t) -> std::optional<std::size_t> {
    return std::nullopt;
  };
  unreadable.body_size = 10;
  EXPECT_EQ(handle.perform(unreadable).transport, Transport::source_failed);
}

TEST(Transfer, OnlyTooManyRequestsAndServerErrorsAskToBeAskedAgain) {
  for (const long status : {429L, 500L, 502L, 503L, 504L}) EXPECT_TRUE(transient_status(status)) << status;
  for (const long status : {200L, 206L, 307L, 400L, 401L, 403L, 404L, 412L}) {
    EXPECT_FALSE(transient_status(status)) << status;
  }
}

}  // namespace
}  // namespace tp::http
