// Where the ranks of this node compute and how they talk, decided once from the spec, the launcher's
// environment and the GPUs visible. Preflight checks it before anything is fetched; `run` hands it to the
// communicator (backend, the GPU made current before the group forms, NCCL's staging of CPU tensors through
// it) and to the trainer (the device). Torch-free: the caller counts the GPUs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dist/topology.h"
#include "spec/spec.h"

namespace tp::dist {

// The collective library a process group runs on: dist.backend as the plan resolves it.
enum class Backend { gloo, nccl };

inline std::string_view name(Backend backend) {
  switch (backend) {
    case Backend::gloo: return "gloo";
    case Backend::nccl: return "nccl";
  }
  spec::unhandled(backend);
}

struct DevicePlan {
  Backend backend = Backend::gloo;  // dist.backend resolved: nccl when GPUs are visible, gloo otherwise
  int visible_gpus = 0;
  int local_processes = 1;  // the ranks on this node (the launcher's LOCAL_WORLD_SIZE or PET_NPROC_PER_NODE, or the spec)
  std::optional<int> gpu;   // this process's CUDA device, its local rank; none: it computes on the CPU
};

// Throws tp::Error (ExitCode::usage) naming the setting to change when the plan cannot work: nccl without a
// GPU, more ranks on the node than GPUs visible (each rank needs its own), fp16 without a GPU.
DevicePlan plan_devices(const spec::Spec& spec, const Topology& topology, int visible_gpus);

// One line for preflight and the log, such as "2 GPU(s) visible, 2 rank(s) on this node, this one on cuda:1; nccl".
std::string describe(const DevicePlan& plan);

}  // namespace tp::dist
