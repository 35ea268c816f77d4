#include "echo_server.h"

#include "support/process.h"

namespace tp::testing {

EchoServer::EchoServer()
    : port_(free_port()),
      process_(
          "python3 " + shell_quote(source_dir() + "/tests/http/echo_server.py") + " " + std::to_string(port_),
          directory_.path() / "echo.log") {
  wait_for_port(port_);
}

}  // namespace tp::testing
