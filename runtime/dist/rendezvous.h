// The rendezvous before a process group forms: rank 0 serves a c10d TCPStore at the master's address, the
// others connect to it, and rank 0 gives its verdict there once every rank has arrived: "go on", or the
// failure of a rank that could not get this far (docs/distributed.md, "Rendezvous"), so that a rank
// refusing a changed spec stops the others in seconds instead of after dist.timeout_s.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <string>

#include "dist/communicator.h"

namespace c10d {
class TCPStore;
}

namespace tp::dist {

// A connection to the master's store (or, with `server`, the store itself) with this per-request timeout.
c10::intrusive_ptr<c10d::TCPStore> connect_store(const ProcessGroupOptions& options, bool server,
                                                 std::chrono::milliseconds timeout);

// Connects (rank 0: serves) the store, retrying with backoff while the master's name does not resolve or
// its port does not listen, then waits for every rank (rank 0) or for rank 0's verdict (the others).
// Throws tp::Error: peer_lost when ranks are missing after the timeout; a rank's failure before the
// rendezvous in that rank's own class, naming it.
c10::intrusive_ptr<c10d::TCPStore> rendezvous(const ProcessGroupOptions& options);

}  // namespace tp::dist
