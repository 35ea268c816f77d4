// Servers that tests start in the background (git daemon, nginx, sshd...), on free loopback ports.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace tp::testing {

// Runs `command` with /bin/sh in its own process group, output to `log_file`; the whole group is
// terminated on destruction, or when the test process dies without running destructors (a crash):
// a guard process leads the group and stops it when a pipe from the test process closes.
class BackgroundProcess {
 public:
  BackgroundProcess(const std::string& command, const std::filesystem::path& log_file);
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  // What the process has printed so far.
  std::string log() const;

 private:
  pid_t pid_;          // the guard, leader of the process group
  int lifeline_ = -1;  // write end of the guard's pipe, held only by the test process
  std::filesystem::path log_file_;
};

// The socket address 127.0.0.1:port.
sockaddr_in loopback_address(int port);
// A TCP port on 127.0.0.1 that nothing listens on right now.
int free_port();
// Waits until something accepts connections on 127.0.0.1:port; throws std::runtime_error after `timeout`.
void wait_for_port(int port, std::chrono::seconds timeout = std::chrono::seconds(20));

}  // namespace tp::testing
