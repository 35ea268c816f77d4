#include "dist/topology.h"

#include <cstdlib>

#include "common/error.h"

namespace tp::dist {
namespace {

// The largest value a variable may hold, and the largest world: ranks must fit an int everywhere.
constexpr long kMaxCount = 1 << 20;

class Reader {
 public:
  explicit Reader(const EnvironmentLookup& environment) : environment_(environment) {}

  std::optional<std::string> text(const std::string& name) const {
    auto value = environment_(name);
    if (value && value->empty()) return std::nullopt;
    return value;
  }

  // An integer variable >= `minimum`; "auto" only where `allow_auto` (returned as nothing).
  std::optional<int> integer(const std::string& name, int minimum, bool allow_auto = false) const {
    const auto value = text(name);
    if (!value || (allow_auto && *value == "auto")) return std::nullopt;
    char* end = nullptr;
    const long parsed = std::strtol(value->c_str(), &end, 10);
    if (end == value->c_str() || *end != '\0' || parsed < minimum || parsed > kMaxCount) {
      fail(ExitCode::usage, "environment variable {}={} is not an integer >= {}", name, *value, minimum);
    }
    return static_cast<int>(parsed);
  }

  // The first of two alternative variables that is set; both set must agree.
  std::optional<int> either(const std::string& preferred, const std::string& other, int minimum) const {
    const auto a = integer(preferred, minimum);
    const auto b = integer(other, minimum);
    if (a && b && *a != *b) fail(ExitCode::usage, "{}={} disagrees with {}={}", preferred, *a, other, *b);
    return a ? a : b;
  }

 private:
  const EnvironmentLookup& environment_;
};

void read_master(const Reader& env, Topology& topology) {
  auto address = env.text("PET_MASTER_ADDR");
  if (!address) address = env.text("MASTER_ADDR");
  if (address) topology.master_addr = *address;
  if (const auto port = env.either("PET_MASTER_PORT", "MASTER_PORT", 1)) {
    if (*port > 65535) fail(ExitCode::usage, "MASTER_PORT={} is not a TCP port", *port);
    topology.master_port = *port;
  }
  if (topology.nnodes > 1 && !address) {
    fail(ExitCode::usage, "{} nodes but no MASTER_ADDR or PET_MASTER_ADDR: the workers cannot find the master",
         topology.nnodes);
  }
}

}  // namespace

std::optional<std::string> process_environment(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

Topology read_topology(const EnvironmentLookup& environment, int spec_nproc_per_node, int devices) {
  const Reader env(environment);
  Topology topology;

  // torchrun (or trainpoint's own launcher): this process is one worker.
  if (const auto local_rank = env.integer("LOCAL_RANK", 0)) {
    const auto rank = env.integer("RANK", 0);
    const auto world = env.integer("WORLD_SIZE", 1);
    const auto local_world = env.integer("LOCAL_WORLD_SIZE", 1);
    if (!rank || !world || !local_world) {
      fail(ExitCode::usage, "LOCAL_RANK is set, so RANK, WORLD_SIZE and LOCAL_WORLD_SIZE must be too (torchrun sets all four)");
    }
    if (*local_rank >= *local_world || *rank >= *world || *world % *local_world != 0) {
      fail(ExitCode::usage,
           "inconsistent torchrun variables: RANK={} LOCAL_RANK={} WORLD_SIZE={} LOCAL_WORLD_SIZE={}", *rank,
           *local_rank, *world, *local_world);
    }
    topology.convention = "torchrun";
    topology.rank = rank;
    topology.local_rank = local_rank;
    topology.nproc_per_node = *local_world;
    topology.nproc_from = fmt::format("LOCAL_WORLD_SIZE={}", *local_world);
    topology.nnodes = *world / *local_world;
    topology.node_rank = *rank / *local_world;
    read_master(env, topology);
    return topology;
  }

  // An elastic PyTorchJob (elasticPolicy) gives a range of nodes and a c10d rendezvous endpoint instead of
  // RANK, WORLD_SIZE and MASTER_ADDR: the ranks would be assigned by torchrun's elastic agent, which trainpoint is
  // not. Refused at once, saying what to change, rather than waiting for a master that is never named.
  const auto rdzv = env.text("PET_RDZV_ENDPOINT");
  const auto pet_nnodes_text = env.text("PET_NNODES");
  if ((pet_nnodes_text && pet_nnodes_text->find(':') != std::string::npos) || (rdzv && !env.text("MASTER_ADDR"))) {
    fail(ExitCode::usage, "an elastic PyTorchJob (PET_NNODES={}, PET_RDZV_ENDPOINT={}): trainpoint runs a fixed "
         "number of nodes, each told its rank; remove elasticPolicy from the job (trainpoint submit and render-job "
         "never write it) and give the replicas as a number", pet_nnodes_text.value_or("unset"), rdzv.value_or("unset"));
  }

  // A node: Kubeflow PyTorchJob v1 (RANK is the pod index, WORLD_SIZE counts processes or pods),
  // Kubeflow Trainer v2 (PET_* only), or a plain single-node run.
  const auto pet_nproc = env.integer("PET_NPROC_PER_NODE", 1, /*allow_auto=*/true);
  int nproc = spec_nproc_per_node > 0 ? spec_nproc_per_node : (devices > 0 ? devices : 1);
  topology.nproc_from = spec_nproc_per_node > 0 ? fmt::format("dist.nproc_per_node = {}", spec_nproc_per_node)
                                                : "dist.nproc_per_node = \"auto\"";
  if (pet_nproc) {
    if (spec_nproc_per_node > 0 && spec_nproc_per_node != *pet_nproc) {
      fail(ExitCode::usage, "dist.nproc_per_node = {} in the spec disagrees with PET_NPROC_PER_NODE={}",
           spec_nproc_per_node, *pet_nproc);
    }
    nproc = *pet_nproc;
    topology.nproc_from = fmt::format("PET_NPROC_PER_NODE={}", *pet_nproc);
  }
  const auto pod_rank = env.integer("RANK", 0);
  const auto pet_node_rank = env.integer("PET_NODE_RANK", 0);
  if (pod_rank && pet_node_rank && *pod_rank != *pet_node_rank) {
    fail(ExitCode::usage, "RANK={} (the pod's index) disagrees with PET_NODE_RANK={}", *pod_rank, *pet_node_rank);
  }
  const auto pet_nnodes = env.integer("PET_NNODES", 1);
  std::optional<int> nnodes = pet_nnodes;
  if (const auto world = env.integer("WORLD_SIZE", 1)) {
    // PyTorchJob v1: WORLD_SIZE = replicas x nprocPerNode when nprocPerNode is a number, else replicas.
    int from_world = *world;
    if (pet_nproc) {
      if (*world % *pet_nproc != 0) {
        fail(ExitCode::usage, "WORLD_SIZE={} is not a multiple of PET_NPROC_PER_NODE={}", *world, *pet_nproc);
      }
      from_world = *world / *pet_nproc;
    }
    if (nnodes && *nnodes != from_world) {
      fail(ExitCode::usage, "PET_NNODES={} disagrees with WORLD_SIZE={} ({} nodes)", *nnodes, *world, from_world);
    }
    nnodes = from_world;
    topology.convention = "pytorchjob";
  } else {
    topology.convention = pet_nnodes || pet_node_rank ? "trainjob" : "single node";
  }
  topology.nnodes = nnodes.value_or(1);
  topology.node_rank = pet_node_rank ? *pet_node_rank : pod_rank.value_or(0);
  topology.nproc_per_node = nproc;
  if (static_cast<long>(topology.nnodes) * topology.nproc_per_node > kMaxCount) {
    fail(ExitCode::usage, "{} nodes x {} processes per node is more than {} processes", topology.nnodes,
         topology.nproc_per_node, kMaxCount);
  }
  if (topology.node_rank >= topology.nnodes) {
    fail(ExitCode::usage, "node rank {} is outside the {} nodes of the job (RANK/PET_NODE_RANK vs WORLD_SIZE/PET_NNODES)",
         topology.node_rank, topology.nnodes);
  }
  read_master(env, topology);
  return topology;
}

}  // namespace tp::dist
