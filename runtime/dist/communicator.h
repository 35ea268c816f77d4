// The one interface training code uses to talk to other ranks. Training never touches c10d
// directly, so a backend can be swapped (Gloo, NCCL) and tests can run ranks cheaply.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace tp::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Sums each tensor element-wise over all ranks, in place.
  virtual void all_reduce_sum(std::vector<at::Tensor>& tensors) = 0;
  // Copies `root`'s tensors into every other rank's, in place.
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
};

// World size 1: every collective is the identity.
std::unique_ptr<Communicator> single_process();

}  // namespace tp::dist
