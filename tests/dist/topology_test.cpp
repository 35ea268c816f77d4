#include "dist/topology.h"

#include <gtest/gtest.h>

#include <map>

#include "common/error.h"

namespace tp::dist {
namespace {

using Env = std::map<std::string, std::string>;

Topology read(const Env& env, int spec_nproc = 0, int devices = 0) {
  return read_topology(
      [&](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
      },
      spec_nproc, devices);
}

std::string error_of(const Env& env, int spec_nproc = 0, int devices = 0) {
  try {
    read(env, spec_nproc, devices);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    return error.what();
  }
  ADD_FAILURE() << "expected an error";
  return "";
}

TEST(Topology, NoLauncherIsOneNodeWithOneProcessOnCpu) {
  const auto t = read({});
  EXPECT_EQ(t.world_size(), 1);
  EXPECT_FALSE(t.rank.has_value());
  EXPECT_EQ(t.convention, "single node");
}

TEST(Topology, AutoIsOneWorkerPerGpu) {
  EXPECT_EQ(read({}, 0, 4).nproc_per_node, 4);
  EXPECT_EQ(read({}, 2, 4).nproc_per_node, 2);
}

TEST(Topology, TorchrunSingleProcess) {
  const auto t = read({{"RANK", "0"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_WORLD_SIZE", "1"},
                       {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(t.convention, "torchrun");
  EXPECT_EQ(*t.rank, 0);
  EXPECT_EQ(t.world_size(), 1);
  EXPECT_EQ(t.master_addr, "10.0.0.1");
  EXPECT_EQ(t.master_port, 1234);
}

TEST(Topology, TorchrunManyProcessesOnManyNodes) {
  const auto t = read({{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"LOCAL_WORLD_SIZE", "4"},
                       {"MASTER_ADDR", "master"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(*t.rank, 5);
  EXPECT_EQ(*t.local_rank, 1);
  EXPECT_EQ(t.nnodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.world_size(), 8);
}

TEST(Topology, PyTorchJobWithNumericNprocPerNode) {
  // 3 replicas x 2 processes: WORLD_SIZE counts processes, RANK is the pod index.
  const auto t = read({{"RANK", "2"}, {"WORLD_SIZE", "6"}, {"PET_NPROC_PER_NODE", "2"}, {"MASTER_ADDR", "job-master-0"},
                       {"MASTER_PORT", "23456"}});
  EXPECT_EQ(t.convention, "pytorchjob");
  EXPECT_FALSE(t.rank.has_value()) << "the pod is a node that launches its workers";
  EXPECT_EQ(t.nnodes, 3);
  EXPECT_EQ(t.node_rank, 2);
  EXPECT_EQ(t.nproc_per_node, 2);
  EXPECT_EQ(t.world_size(), 6);
  EXPECT_EQ(t.master_addr, "job-master-0");
}

TEST(Topology, PyTorchJobWithAutoNprocCountsPods) {
  // nprocPerNode "auto" (or unset): WORLD_SIZE is the number of replicas.
  const auto t = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"PET_NPROC_PER_NODE", "auto"}, {"MASTER_ADDR", "m"},
                       {"MASTER_PORT", "23456"}},
                      0, 4);
  EXPECT_EQ(t.nnodes, 2);
  EXPECT_EQ(t.node_rank, 1);
  EXPECT_EQ(t.nproc_per_node, 4);
  EXPECT_EQ(t.world_size(), 8);
  const auto one = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}}, 1, 0);
  EXPECT_EQ(one.world_size(), 2);
  EXPECT_EQ(one.nproc_per_node, 1);
}

TEST(Topology, TrainJobV2) {
  const auto t = read({{"PET_NNODES", "4"}, {"PET_NPROC_PER_NODE", "2"}, {"PET_NODE_RANK", "3"},
                       {"PET_MASTER_ADDR", "trainjob-node-0-0.trainjob"}, {"PET_MASTER_PORT", "29400"}});
  EXPECT_EQ(t.convention, "trainjob");
  EXPECT_EQ(t.nnodes, 4);
  EXPECT_EQ(t.node_rank, 3);
  EXPECT_EQ(t.world_size(), 8);
  EXPECT_EQ(t.master_addr, "trainjob-node-0-0.trainjob");
  EXPECT_EQ(t.master_port, 29400);
  const auto single = read({{"PET_NNODES", "2"}, {"PET_NPROC_PER_NODE", "1"}, {"PET_NODE_RANK", "0"},
                            {"PET_MASTER_ADDR", "m"}, {"PET_MASTER_PORT", "29400"}});
  EXPECT_EQ(single.world_size(), 2);
}

TEST(Topology, InconsistentValuesAreClearErrors) {
  EXPECT_EQ(error_of({{"RANK", "3"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}}),
            "node rank 3 is outside the 2 nodes of the job (RANK/PET_NODE_RANK vs WORLD_SIZE/PET_NNODES)");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "5"}, {"PET_NPROC_PER_NODE", "2"}, {"MASTER_ADDR", "m"}}),
            "WORLD_SIZE=5 is not a multiple of PET_NPROC_PER_NODE=2");
  EXPECT_EQ(error_of({{"PET_NNODES", "3"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}}),
            "PET_NNODES=3 disagrees with WORLD_SIZE=2 (2 nodes)");
  EXPECT_EQ(error_of({{"RANK", "1"}, {"PET_NODE_RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}}),
            "RANK=1 (the pod's index) disagrees with PET_NODE_RANK=0");
  EXPECT_EQ(error_of({{"PET_NPROC_PER_NODE", "2"}}, 4), "dist.nproc_per_node = 4 in the spec disagrees with PET_NPROC_PER_NODE=2");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "two"}}), "environment variable WORLD_SIZE=two is not an integer >= 1");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}),
            "2 nodes but no MASTER_ADDR or PET_MASTER_ADDR: the workers cannot find the master");
  EXPECT_EQ(error_of({{"LOCAL_RANK", "2"}, {"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}}),
            "inconsistent torchrun variables: RANK=2 LOCAL_RANK=2 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2");
  EXPECT_NE(error_of({{"LOCAL_RANK", "0"}}).find("RANK, WORLD_SIZE and LOCAL_WORLD_SIZE must be too"), std::string::npos);
  EXPECT_EQ(error_of({{"MASTER_PORT", "70000"}}), "MASTER_PORT=70000 is not a TCP port");
  EXPECT_EQ(error_of({{"PET_MASTER_PORT", "1"}, {"MASTER_PORT", "2"}}), "PET_MASTER_PORT=1 disagrees with MASTER_PORT=2");
}

// What the Kubeflow training operator v1.9.3 gave the pods of a PyTorchJob with elasticPolicy (min 1, max 2;
// ../shared/design/facts.md): no RANK, WORLD_SIZE or MASTER_ADDR. Refused at once with what to change.
TEST(Topology, AnElasticPyTorchJobIsRefusedSayingWhatToChange) {
  const Env elastic{{"PET_RDZV_ENDPOINT", "job-worker-0:23456"}, {"PET_RDZV_BACKEND", "c10d"},
                    {"PET_NNODES", "1:2"}, {"PET_MAX_RESTARTS", "3"}, {"PET_NPROC_PER_NODE", "1"}};
  EXPECT_EQ(error_of(elastic),
            "an elastic PyTorchJob (PET_NNODES=1:2, PET_RDZV_ENDPOINT=job-worker-0:23456): trainpoint runs a fixed number "
            "of nodes, each told its rank; remove elasticPolicy from the job (trainpoint submit and render-job never "
            "write it) and give the replicas as a number");
  EXPECT_NE(error_of({{"PET_NNODES", "2:2"}, {"PET_RDZV_ENDPOINT", "job-worker-0:23456"}}).find("an elastic PyTorchJob"),
            std::string::npos);
}

// Found by tests/fuzz (topology): each variable was bounded, but not their product, so the world size
// (nodes x processes per node) overflowed int.
TEST(Topology, TheWorldMustFitAnInt) {
  EXPECT_EQ(error_of({{"PET_NNODES", "1048576"}, {"PET_NPROC_PER_NODE", "1048576"}, {"MASTER_ADDR", "m"}}),
            "1048576 nodes x 1048576 processes per node is more than 1048576 processes");
  EXPECT_EQ(error_of({{"WORLD_SIZE", "4096"}, {"MASTER_ADDR", "m"}}, 1024), "4096 nodes x 1024 processes per node is more than 1048576 processes");
  EXPECT_EQ(read({{"PET_NNODES", "1024"}, {"PET_NPROC_PER_NODE", "1024"}, {"MASTER_ADDR", "m"}}).world_size(), 1 << 20);
}

}  // namespace
}  // namespace tp::dist
