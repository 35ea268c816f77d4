// The one interface training code uses to talk to other ranks. Training never touches c10d
// directly, so a backend can be swapped (Gloo, NCCL) and tests can run ranks cheaply.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "dist/device_plan.h"
#include "dist/phase.h"

namespace tp::dist {

// A collective in flight.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  // Blocks until done. Throws tp::Error (ExitCode::peer_lost) naming lost ranks on failure.
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Sums each tensor element-wise over all ranks, in place.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  // Starts summing `tensor` over all ranks in place; the tensor must outlive the wait. With NCCL it must be
  // on this rank's GPU (the synchronous collectives also take CPU tensors, staged through the GPU).
  virtual std::unique_ptr<PendingCollective> all_reduce_sum_async(at::Tensor& tensor) = 0;
  // Copies `root`'s tensors into every other rank's, in place.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
  // Records this rank's optimizer step and phase for the heartbeat; a no-op without peers.
  virtual void set_progress(std::int64_t /*step*/, Phase /*phase*/) {}
  // Ranks the heartbeat watchdog sees as stalled now (dist.stall_s); 0 without peers.
  virtual int stalled_ranks() const { return 0; }
  // For a LibTorch error caught outside a collective (with NCCL a collective's failure often first shows at a
  // later synchronisation with the GPU): throws tp::Error (ExitCode::peer_lost, naming the lost ranks) when it
  // is a communication failure; returns otherwise.
  virtual void raise_if_communication_failure(const std::exception& /*error*/) {}
};

// Sends `root`'s bytes to every rank and returns them (the length, then the bytes): a checkpoint to ranks
// that lack it, a document every rank must share. Other ranks' `bytes` are ignored.
std::string broadcast_bytes(Communicator& communicator, std::string bytes, int root);

// Collectives built on the Communicator's all-reduce, for what every rank must see alike. Each is one
// collective call per rank (all_gather_strings: two), so every rank must call it at the same point.

// Element-wise sums of `mine` over the ranks (every rank passes as many values).
std::vector<std::int64_t> sum_over_ranks(Communicator& communicator, std::vector<std::int64_t> mine);
std::vector<double> sum_over_ranks(Communicator& communicator, std::vector<double> mine);
// Every rank's value, in rank order.
std::vector<std::int64_t> all_gather_values(Communicator& communicator, std::int64_t mine);
// The smallest value any rank passed.
std::int64_t min_over_ranks(Communicator& communicator, std::int64_t mine);
// Whether any rank passed true.
bool any_rank(Communicator& communicator, bool mine);
// Every rank's strings, rank 0's first, each rank's in its own order; ranks may pass different counts
// (none too). Strings may hold any bytes.
std::vector<std::string> all_gather_strings(Communicator& communicator, const std::vector<std::string>& mine);

// World size 1: every collective is the identity.
std::unique_ptr<Communicator> single_process();

struct ProcessGroupOptions {
  Backend backend = Backend::gloo;
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::chrono::seconds timeout{600};  // rendezvous and each collective
  // This rank's GPU (the device plan's): made current before the group forms; nccl stages CPU tensors through it.
  std::optional<int> cuda_device = std::nullopt;
  std::chrono::seconds heartbeat{5};  // how often each rank publishes its step and phase
  std::chrono::seconds stall{300};    // a rank whose step and phase have not changed for this long is reported
};

// Rendezvous through a c10d TCPStore at the master (rank 0 serves it), retried with backoff until
// the timeout while the master's name does not resolve or its port does not listen, then a
// c10d process group. Throws tp::Error (ExitCode::peer_lost) when the rendezvous times out.
// A heartbeat thread publishes this rank's progress and logs ranks that stall (docs/reliability.md).
// A watchdog thread ends the process (exit 202, naming the lost ranks) when a collective fails or has
// not finished after the timeout, also when the training thread is blocked elsewhere (NCCL's collectives
// do not block the host; a later synchronisation with the GPU does).
std::unique_ptr<Communicator> connect(const ProcessGroupOptions& options);

// Tells the other ranks that this rank failed before the rendezvous, so that they stop with its class and
// message instead of waiting dist.timeout_s for it: rank 0 serves the store with that verdict until every
// rank has read it (or a minute passed); another rank leaves its failure in rank 0's store if it reaches it
// within a minute. `silent_ranks` is how many ranks, this one included, will never read it: a pod whose
// preflight failed speaks for all its local ranks, which do not start. Never throws.
void announce_failure(const ProcessGroupOptions& options, ExitCode code, const std::string& message,
                      int silent_ranks = 1);

// Runs a step a rank takes before the rendezvous (rank 0 deciding which run this is, opening the data,
// building the model); when it throws tp::Error, the other ranks are told (announce_failure) before the
// error goes on.
template <typename Step>
auto before_rendezvous(const ProcessGroupOptions& options, Step&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const Error& error) {
    if (options.world_size > 1) announce_failure(options, error.code(), error.what());
    throw;
  }
}

// The version of the NCCL library this process loaded ("2.28.9"), or "" in a build without NCCL.
std::string nccl_version();

}  // namespace tp::dist
