// NCCL on the GPU machine's one GPU (label gpu: scripts/gpu-check runs these; CPU runs leave the label out).
// The process group forms at world size 1 and its collectives work on GPU tensors and on the CPU tensors the
// trainer passes; a collective that never finishes ends the process with the peer-lost exit class once
// dist.timeout_s has passed, although with NCCL the host never waits for it. NCCL refuses two ranks on one GPU
// ("Duplicate GPU detected"), so more ranks need more GPUs: the multi-rank logic is tested over Gloo.
#include <ATen/cuda/Sleep.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/log.h"
#include "dist/communicator.h"
#include "support/background_process.h"

namespace tp::dist {
namespace {

using namespace std::chrono_literals;

ProcessGroupOptions one_rank_on_the_gpu(std::chrono::seconds timeout) {
  ProcessGroupOptions options;
  options.backend = Backend::nccl;
  options.master_port = testing::free_port();
  options.timeout = timeout;
  options.cuda_device = 0;
  return options;
}

TEST(Nccl, AWorldOfOneFormsAndItsCollectivesWorkOnGpuAndCpuTensors) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: run on the GPU machine (scripts/gpu-check)";
  auto communicator = connect(one_rank_on_the_gpu(60s));
  const auto gpu = torch::TensorOptions(torch::Device(torch::kCUDA, 0));
  std::vector<at::Tensor> tensors{torch::arange(4, gpu.dtype(torch::kFloat)), torch::tensor({3}, torch::kLong)};
  communicator->all_reduce_sum(tensors);
  EXPECT_TRUE(torch::equal(tensors[0].cpu(), torch::arange(4, torch::kFloat)));
  EXPECT_TRUE(tensors[1].device().is_cpu()) << "a CPU tensor comes back on the CPU";
  EXPECT_EQ(tensors[1].item<std::int64_t>(), 3);

  auto gradients = torch::full({1 << 20}, 0.5, gpu.dtype(torch::kFloat));
  communicator->all_reduce_sum_async(gradients)->wait();
  EXPECT_EQ(gradients.sum().item<float>(), 0.5f * (1 << 20));
  communicator->broadcast(tensors, 0);
  communicator->barrier();
  EXPECT_EQ(sum_over_ranks(*communicator, std::vector<std::int64_t>{5}), std::vector<std::int64_t>{5});
  EXPECT_TRUE(any_rank(*communicator, true));
}

TEST(NcclDeathTest, ACollectiveThatNeverFinishesEndsTheProcessAsPeerLost) {
  ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: run on the GPU machine (scripts/gpu-check)";
  // The child starts afresh (not forked from a process that has used CUDA).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        log::init(log::Format::text, spdlog::level::info);  // the error line goes to stderr, as in a run
        auto communicator = connect(one_rank_on_the_gpu(3s));
        auto gradients = torch::ones({16}, torch::TensorOptions(torch::Device(torch::kCUDA, 0)));
        communicator->all_reduce_sum_async(gradients)->wait();  // formed and working
        // The GPU's stream is held for about a minute: the next all-reduce waits behind it.
        at::cuda::sleep(100'000'000'000);
        communicator->all_reduce_sum_async(gradients);
        std::this_thread::sleep_for(60s);
        std::exit(0);
      },
      ::testing::ExitedWithCode(202), "all.reduce.*(not finished after|[Tt]imeout)");
}

}  // namespace
}  // namespace tp::dist
