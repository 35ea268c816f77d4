// The one interface training code uses to talk to other ranks. Training never touches c10d
// directly, so a backend can be swapped (Gloo, NCCL) and tests can run ranks cheaply.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tp::dist {

// What a rank is doing, published with its heartbeat so that a hang names the rank that stalled and
// where (docs/reliability.md). The communicator itself reports waiting in a collective.
enum class Phase { start, data, forward, backward, all_reduce, broadcast, checkpoint, validate };
const char* phase_name(Phase phase);

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
};

// World size 1: every collective is the identity.
std::unique_ptr<Communicator> single_process();

struct ProcessGroupOptions {
  std::string backend = "gloo";  // gloo | nccl
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::chrono::seconds timeout{600};  // rendezvous and each collective
  int device_index = 0;               // nccl: the CUDA device of this rank
  std::chrono::seconds heartbeat{5};  // how often each rank publishes its step and phase
  std::chrono::seconds stall{300};    // a rank whose step and phase have not changed for this long is reported
};

// Rendezvous through a c10d TCPStore at the master (rank 0 serves it), retried with backoff until
// the timeout while the master's name does not resolve or its port does not listen, then a
// c10d process group. Throws tp::Error (ExitCode::peer_lost) when the rendezvous times out.
// A watchdog thread publishes this rank's progress and logs ranks that stall (docs/reliability.md).
std::unique_ptr<Communicator> connect(const ProcessGroupOptions& options);

}  // namespace tp::dist
