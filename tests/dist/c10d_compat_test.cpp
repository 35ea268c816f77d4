// runtime/dist/c10d_compat.h on the LibTorch this is built with: 1.13 in scripts/test, 2.6 (no libuv) in
// scripts/test-libtorch2.
#include <gtest/gtest.h>

#include <functional>

#include "dist/c10d_compat.h"
#include "support/background_process.h"

namespace tp::dist {
namespace {

c10d::TCPStoreOptions store_options(int port, bool server) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = server;
  options.numWorkers = 2;
  options.waitWorkers = false;
  options.timeout = std::chrono::milliseconds(2000);
  return options;
}

TEST(C10dCompat, TheRendezvousStoreServesAndAnswersOnThisLibTorch) {
  const int port = testing::free_port();
  const auto server = compat::make_tcp_store("127.0.0.1", store_options(port, true));
  const auto client = compat::make_tcp_store("127.0.0.1", store_options(port, false));
  client->set("key", std::vector<std::uint8_t>{'o', 'k'});
  EXPECT_EQ(server->get("key"), (std::vector<std::uint8_t>{'o', 'k'}));
}

TEST(C10dCompat, ANetworkFailureIsRetryableAndALibTorchRefusalIsNot) {
  bool refused = false;
  try {
    compat::make_tcp_store("127.0.0.1", store_options(testing::free_port(), false));  // nobody listens there
  } catch (const std::exception& error) {
    refused = true;
    EXPECT_TRUE(compat::is_network_failure(error)) << error.what();
  }
  EXPECT_TRUE(refused);

  try {
    TORCH_CHECK(false, "a check inside LibTorch failed");
  } catch (const c10::Error& error) {
    // 1.13 has no typed distributed errors: it cannot tell the two apart, and retries both.
    EXPECT_EQ(compat::is_network_failure(error), !TP_TORCH_AT_LEAST(2, 2));
  }
}

// With NCCL a failed collective often first shows as a LibTorch error at a later synchronisation.
TEST(C10dCompat, NcclAndDistributedErrorsAreCommunicationFailuresAndOthersAreNot) {
  // Whether the error `body` throws is one; caught by reference, as the trainer catches it.
  auto communication_failure = [](const std::function<void()>& body) {
    try {
      body();
    } catch (const std::exception& error) {
      return compat::is_communication_failure(error);
    }
    ADD_FAILURE() << "no error";
    return false;
  };
  EXPECT_TRUE(communication_failure([] {
    TORCH_CHECK(false, "NCCL error in: ProcessGroupNCCL.cpp:1, remote process exited or there was a network error");
  }));
  EXPECT_FALSE(communication_failure([] { TORCH_CHECK(false, "shape '[3]' is invalid for input of size 2"); }));
#if TP_TORCH_AT_LEAST(2, 2)
  EXPECT_TRUE(communication_failure([] { C10_THROW_ERROR(DistBackendError, "watchdog timeout"); }));
#endif
}

}  // namespace
}  // namespace tp::dist
