#include "git/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

#include "support/background_process.h"

namespace tp::testing {

DroppingProxy::DroppingProxy(int upstream_port, int drops, std::size_t byte_limit)
    : upstream_port_(upstream_port),
      drops_(drops),
      byte_limit_(byte_limit),
      listener_(::socket(AF_INET, SOCK_STREAM, 0)) {
  const int one = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address = loopback_address(0);
  socklen_t length = sizeof address;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener_, 16) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("proxy cannot listen");
  }
  port_ = ntohs(address.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

DroppingProxy::~DroppingProxy() {
  stop_ = true;
  acceptor_.join();
  for (auto& worker : workers_) worker.join();
  ::close(listener_);
}

void DroppingProxy::accept_loop() {
  while (!stop_) {
    pollfd waiting{listener_, POLLIN, 0};
    if (::poll(&waiting, 1, 100) <= 0) continue;
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    const bool drop = connections_++ < drops_;
    workers_.emplace_back([this, client, drop] { forward(client, drop); });
  }
}

void DroppingProxy::forward(int client, bool drop) {
  const int server = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = loopback_address(upstream_port_);
  if (::connect(server, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(server);
    ::close(client);
    return;
  }
  std::size_t from_server = 0;
  char buffer[16384];
  bool open = true;
  while (open && !stop_) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(fds, 2, 100) <= 0) continue;
    for (int i = 0; i < 2 && open; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        open = false;
        break;
      }
      std::size_t allowed = static_cast<std::size_t>(n);
      if (i == 1 && drop) allowed = std::min(allowed, byte_limit_ - std::min(byte_limit_, from_server));
      if (allowed > 0 && ::write(fds[1 - i].fd, buffer, allowed) != static_cast<ssize_t>(allowed))
        open = false;
      if (i == 1) from_server += allowed;
      if (i == 1 && drop && from_server >= byte_limit_) {
        ++dropped_;
        open = false;
      }
    }
  }
  ::close(server);
  ::close(client);
}

}  // namespace tp::testing
