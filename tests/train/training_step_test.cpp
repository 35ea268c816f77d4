// The training step's helpers (train/training_step.h) that the trainer, lr_find and the benchmarks share.
#include "train/training_step.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tp::train {
namespace {

// Dropped, a gradient is undefined in every group (not a tensor of zeros, which LibTorch 1.13's zero_grad
// leaves), and the next backward's gradient is that backward's alone.
TEST(TrainingStep, DropGradientsLeavesNoGradientForBackwardToAddTo) {
  auto body = torch::ones({3}, torch::requires_grad());
  auto head = torch::full({2}, 2.0, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups{torch::optim::OptimizerParamGroup({body}),
                                                        torch::optim::OptimizerParamGroup({head})};
  torch::optim::SGD optimizer(groups, torch::optim::SGDOptions(0.1));
  const auto loss = [&] { return (body * 3).sum() + (head * head).sum(); };
  loss().backward();
  ASSERT_TRUE(body.grad().defined());

  drop_gradients(optimizer);
  EXPECT_FALSE(body.grad().defined());
  EXPECT_FALSE(head.grad().defined());

  loss().backward();
  EXPECT_TRUE(torch::equal(body.grad(), torch::full({3}, 3.0)));
  EXPECT_TRUE(torch::equal(head.grad(), torch::full({2}, 4.0)));
}

}  // namespace
}  // namespace tp::train
