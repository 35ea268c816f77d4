// A plain TCP connection to host:port, for the waits that must not go through a protocol's client: preflight's
// "does the master listen" and the rendezvous's "has the earlier master ended".
#pragma once

#include <string>

namespace tp {

// A connected socket (close-on-exec) to the first of host's addresses that accepts, or -1 with `failure` saying
// why: "HOST does not resolve (...)" or "HOST:PORT refuses connections (...)". The caller closes the socket.
int connect_tcp(const std::string& host, int port, std::string& failure);

}  // namespace tp
