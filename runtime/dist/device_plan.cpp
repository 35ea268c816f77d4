#include "dist/device_plan.h"

#include "common/error.h"

namespace tp::dist {

DevicePlan plan_devices(const spec::Spec& spec, const Topology& topology, int visible_gpus) {
  DevicePlan plan;
  plan.visible_gpus = visible_gpus;
  plan.local_processes = topology.nproc_per_node;
  switch (spec.dist.backend) {
    case spec::Backend::automatic: plan.backend = visible_gpus > 0 ? Backend::nccl : Backend::gloo; break;
    case spec::Backend::gloo: plan.backend = Backend::gloo; break;
    case spec::Backend::nccl: plan.backend = Backend::nccl; break;
  }
  if (plan.backend == Backend::nccl && visible_gpus == 0) {
    fail(ExitCode::usage, "dist.backend = \"nccl\" needs GPUs but none are visible: request nvidia.com/gpu for the "
         "pod (k8s.gpus_per_worker) or use dist.backend = \"gloo\"");
  }
  if (visible_gpus > 0) {
    if (plan.local_processes > visible_gpus) {
      fail(ExitCode::usage, "{} starts {} ranks on this node but only {} GPU(s) are visible, and each rank needs its "
           "own: start at most {} per node, request more GPUs (k8s.gpus_per_worker), or hide the GPUs "
           "(CUDA_VISIBLE_DEVICES=\"\") to train on the CPU", topology.nproc_from, plan.local_processes, visible_gpus,
           visible_gpus);
    }
    plan.gpu = topology.local_rank.value_or(0);
  }
  if (spec.train.precision == spec::Precision::fp16 && !plan.gpu) {
    fail(ExitCode::usage, "train.precision = fp16 needs a CUDA device, and this rank trains on the CPU: use bf16 "
         "(CPU autocast) or fp32");
  }
  return plan;
}

std::string describe(const DevicePlan& plan) {
  if (!plan.gpu) {
    return fmt::format("no GPU visible: CPU training with {} rank(s) on this node; {}", plan.local_processes,
                       name(plan.backend));
  }
  return fmt::format("{} GPU(s) visible, {} rank(s) on this node, this one on cuda:{}; {}", plan.visible_gpus,
                     plan.local_processes, *plan.gpu, name(plan.backend));
}

}  // namespace tp::dist
