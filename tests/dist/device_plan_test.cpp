// The device plan from a spec, the launcher's variables and a number of visible GPUs (no GPU needed: the
// count is what torch::cuda::device_count() would say).
#include "dist/device_plan.h"

#include <gtest/gtest.h>

#include <map>

#include "common/error.h"

namespace tp::dist {
namespace {

using Env = std::map<std::string, std::string>;

spec::Spec spec_with(const std::vector<std::string>& overrides) {
  return spec::load_string("[data]\nsource = \"d\"\n[model]\narch = \"mlp\"\n", overrides, "train.toml").spec;
}

DevicePlan plan(const spec::Spec& spec, const Env& env, int gpus) {
  const Topology topology = read_topology(
      [&](const std::string& name) -> std::optional<std::string> {
        const auto it = env.find(name);
        return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
      },
      static_cast<int>(spec.dist.nproc_per_node), gpus);
  return plan_devices(spec, topology, gpus);
}

std::string usage_error(const spec::Spec& spec, const Env& env, int gpus) {
  try {
    plan(spec, env, gpus);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

Env torchrun(int local_rank, int local_world) {
  return {{"LOCAL_RANK", std::to_string(local_rank)}, {"RANK", std::to_string(local_rank)},
          {"WORLD_SIZE", std::to_string(local_world)}, {"LOCAL_WORLD_SIZE", std::to_string(local_world)}};
}

TEST(DevicePlan, OnTheCpuGlooAndNoGpu) {
  const DevicePlan p = plan(spec_with({}), torchrun(1, 2), 0);
  EXPECT_EQ(p.backend, dist::Backend::gloo);
  EXPECT_FALSE(p.gpu);
  EXPECT_EQ(p.local_processes, 2);
  EXPECT_EQ(describe(p), "no GPU visible: CPU training with 2 rank(s) on this node; gloo");
}

TEST(DevicePlan, EachLocalRankOnItsOwnGpuWithNccl) {
  const DevicePlan p = plan(spec_with({}), torchrun(1, 2), 2);
  EXPECT_EQ(p.backend, dist::Backend::nccl);
  EXPECT_EQ(p.gpu, 1);
  EXPECT_EQ(describe(p), "2 GPU(s) visible, 2 rank(s) on this node, this one on cuda:1; nccl");
  // A pod's own launcher (PyTorchJob's PET_NPROC_PER_NODE) on 4 GPUs: it starts 2, on GPUs 0 and 1.
  EXPECT_EQ(plan(spec_with({}), {{"PET_NPROC_PER_NODE", "2"}}, 4).local_processes, 2);
  // Gloo on GPUs: the same devices.
  EXPECT_EQ(plan(spec_with({"dist.backend=gloo"}), torchrun(1, 2), 2).gpu, 1);
}

TEST(DevicePlan, MoreRanksOnTheNodeThanGpusIsAUsageErrorNamingWhatSetThem) {
  EXPECT_NE(usage_error(spec_with({}), torchrun(0, 3), 2)
                .find("LOCAL_WORLD_SIZE=3 starts 3 ranks on this node but only 2 GPU(s) are visible"),
            std::string::npos);
  EXPECT_NE(usage_error(spec_with({}), {{"PET_NPROC_PER_NODE", "4"}}, 2).find("PET_NPROC_PER_NODE=4 starts 4 ranks"),
            std::string::npos);
  EXPECT_NE(usage_error(spec_with({"dist.nproc_per_node=3"}), {}, 1).find("dist.nproc_per_node = 3 starts 3 ranks"),
            std::string::npos);
}

TEST(DevicePlan, NcclWithoutGpusAndFp16OnTheCpuAreUsageErrors) {
  EXPECT_NE(usage_error(spec_with({"dist.backend=nccl"}), {}, 0).find("dist.backend = \"nccl\" needs GPUs"),
            std::string::npos);
  EXPECT_NE(usage_error(spec_with({"train.precision=fp16"}), {}, 0).find("train.precision = fp16 needs a CUDA device"),
            std::string::npos);
  EXPECT_EQ(plan(spec_with({"train.precision=fp16"}), {}, 1).gpu, 0);
}

}  // namespace
}  // namespace tp::dist
