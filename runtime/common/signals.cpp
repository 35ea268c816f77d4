#include "common/signals.h"

#include <csignal>

namespace tp {
namespace {

volatile std::sig_atomic_t stop_flag = 0;

void request_stop(int) { stop_flag = 1; }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

bool stop_requested() { return stop_flag != 0; }

void ignore_broken_pipes() {
  std::signal(SIGPIPE, SIG_IGN);
}

void restore_broken_pipe_default() {
  std::signal(SIGPIPE, SIG_DFL);
}

}  // namespace tp
