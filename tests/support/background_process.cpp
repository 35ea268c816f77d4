#include "support/background_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/process.h"

namespace tp::testing {

sockaddr_in loopback_address(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

BackgroundProcess::BackgroundProcess(const std::string& command, const std::filesystem::path& log_file)
    : log_file_(log_file) {
  int lifeline[2];
  if (::pipe2(lifeline, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // The guard: keeps only the read end, starts the command, and waits for end of file.
    ::setpgid(0, 0);
    const int read_end = lifeline[0];
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != read_end) ::close(fd);
    }
    const pid_t server = ::fork();
    if (server == 0) {
      const std::string redirected = "exec " + command + " >" + log_file.string() + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", redirected.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    char byte;
    while (::read(read_end, &byte, 1) < 0 && errno == EINTR) {
    }
    ::signal(SIGTERM, SIG_IGN);
    ::kill(0, SIGTERM);
    ::sleep(2);
    ::kill(0, SIGKILL);
    ::_exit(0);
  }
  ::setpgid(pid_, pid_);
  ::close(lifeline[0]);
  lifeline_ = lifeline[1];
}

BackgroundProcess::~BackgroundProcess() {
  ::kill(-pid_, SIGTERM);
  ::close(lifeline_);
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(-pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string BackgroundProcess::log() const {
  std::ifstream in(log_file_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = loopback_address(0);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot bind a free port");
  }
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

void wait_for_port(int port, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback_address(port);
    const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    if (connected) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("nothing listens on 127.0.0.1:" + std::to_string(port));
}

}  // namespace tp::testing
