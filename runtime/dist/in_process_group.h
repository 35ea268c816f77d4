// Ranks on threads of one process: a Communicator for tests of the multi-rank logic (checkpoint agreement,
// the collectives of communicator.h, fit itself) that run in milliseconds without c10d or processes.
// Not a mock: it carries out every operation for real over shared memory and a barrier, as gloo's own
// tests run ranks on threads. Sums are taken in rank order, so every rank gets bit-identical results.
#pragma once

#include <memory>
#include <vector>

#include "dist/communicator.h"

namespace tp::dist {

// One Communicator per rank (rank i at index i), each to be used by its own thread; they share the group.
// Ranks that call different collectives, or pass tensors that differ in number, shape or type, all throw
// tp::Error (internal). A rank whose Communicator is destroyed has left: a collective waiting for it throws
// tp::Error (peer_lost) naming it, as a real group's peers do.
std::vector<std::unique_ptr<Communicator>> in_process_group(int world_size);

}  // namespace tp::dist
