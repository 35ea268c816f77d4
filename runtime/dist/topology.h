// Where this process stands in the job: its ranks, the world, and the rendezvous address, read
// from whichever launcher started it (torchrun, Kubeflow PyTorchJob v1, Kubeflow Trainer v2).
// docs/distributed.md has the table of conventions.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace tp::dist {

struct Topology {
  int node_rank = 0;
  int nnodes = 1;
  int nproc_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string convention;  // which launcher's variables were read, for the log
  std::string nproc_from;  // what set nproc_per_node, for messages: "LOCAL_WORLD_SIZE=4", "dist.nproc_per_node = 2"
  // Set only when this process is itself one worker (torchrun started it, or trainpoint's own
  // launcher did): its global and local rank. Otherwise this process is a node that launches
  // nproc_per_node workers.
  std::optional<int> rank;
  std::optional<int> local_rank;

  int world_size() const { return nnodes * nproc_per_node; }
};

using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;
// Reads the real process environment.
std::optional<std::string> process_environment(const std::string& name);

// `spec_nproc_per_node` is the spec's dist.nproc_per_node (0 = auto); `devices` the GPUs visible
// (0 on CPU). Throws tp::Error (ExitCode::usage) naming the variables that disagree.
Topology read_topology(const EnvironmentLookup& environment, int spec_nproc_per_node, int devices);

}  // namespace tp::dist
