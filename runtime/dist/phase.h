// What a rank is doing, published with its heartbeat so that a hang names the rank that stalled and
// where (docs/reliability.md). The communicator itself reports waiting in a collective.
#pragma once

namespace tp::dist {

enum class Phase { start, data, forward, backward, all_reduce, broadcast, checkpoint, validate };
const char* phase_name(Phase phase);

}  // namespace tp::dist
