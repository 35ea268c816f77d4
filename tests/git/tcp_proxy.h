// A TCP proxy on loopback that can cut connections mid-transfer, to test retries of a fetch.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace tp::testing {

class DroppingProxy {
 public:
  // Forwards 127.0.0.1:port() to 127.0.0.1:upstream_port. The first `drops` connections are
  // closed once the server has sent `byte_limit` bytes through them.
  DroppingProxy(int upstream_port, int drops, std::size_t byte_limit);
  ~DroppingProxy();
  DroppingProxy(const DroppingProxy&) = delete;
  DroppingProxy& operator=(const DroppingProxy&) = delete;

  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  int dropped() const { return dropped_.load(); }

 private:
  void accept_loop();
  void forward(int client, bool drop);

  int upstream_port_;
  int drops_;
  std::size_t byte_limit_;
  int listener_;
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> dropped_{0};
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

}  // namespace tp::testing
