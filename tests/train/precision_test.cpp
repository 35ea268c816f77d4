// fp16's dynamic loss scaling (train/precision.h) on the CPU, with inf and NaN gradients put in by hand,
// against torch.cuda.amp.GradScaler's documented rules: the scale starts at 2^16 (init_scale); a step whose
// gradients hold an inf or a NaN is skipped and the scale halved (backoff_factor 0.5); after 2000 steps in a
// row without one (growth_interval) the scale doubles (growth_factor 2). On LibTorch 2.3 and later, also step
// for step against PyTorch's own GradScaler of the same version, which runs on the CPU there
// (torch.amp.GradScaler("cpu")), in the Python tests/train/CMakeLists.txt names (TP_TORCH_PYTHON).
#include "train/precision.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "dist/c10d_compat.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::train {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One step on the parameter p (two elements) whose gradient is `scale` x (1, second): backward of the scaled
// loss (p . (1, second)), then unscale. Returns whether the step may be applied.
bool step(LossScaler& scaler, const torch::Tensor& p, double second) {
  p.mutable_grad() = torch::Tensor();
  const torch::Tensor loss = (p * torch::tensor({1.0, second}, torch::kFloat)).sum();
  scaler.scaled(loss).backward();
  return scaler.unscale({p});
}

torch::Tensor parameter() { return torch::zeros({2}, torch::kFloat).set_requires_grad(true); }

TEST(LossScaler, TheLossIsMultipliedByTwoToTheSixteenFirst) {
  LossScaler scaler;
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.scaled(torch::tensor(0.5)).item<double>(), 32768.0);
}

TEST(LossScaler, AnInfOrNanGradientSkipsTheStepAndHalvesTheScale) {
  LossScaler scaler;
  const torch::Tensor p = parameter();
  EXPECT_FALSE(step(scaler, p, kInf));
  EXPECT_EQ(scaler.scale(), 32768.0);
  EXPECT_FALSE(step(scaler, p, std::nan("")));
  EXPECT_EQ(scaler.scale(), 16384.0);
  EXPECT_FALSE(step(scaler, p, -kInf));
  EXPECT_EQ(scaler.scale(), 8192.0);
}

TEST(LossScaler, FiniteGradientsAreUnscaledAndTheScaleDoublesAfter2000StepsInARowWithoutAnOverflow) {
  LossScaler scaler;
  const torch::Tensor p = parameter();
  ASSERT_TRUE(step(scaler, p, 3.0));
  EXPECT_TRUE(torch::equal(p.grad(), torch::tensor({1.0, 3.0}, torch::kFloat))) << p.grad();
  for (int i = 2; i < 2000; ++i) ASSERT_TRUE(step(scaler, p, 1.0)) << i;
  EXPECT_EQ(scaler.scale(), 65536.0);
  ASSERT_TRUE(step(scaler, p, 1.0));  // the 2000th
  EXPECT_EQ(scaler.scale(), 131072.0);

  // An overflow starts the count again: the scale grows only after 2000 more good steps.
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(step(scaler, p, 1.0));
  ASSERT_FALSE(step(scaler, p, kInf));
  EXPECT_EQ(scaler.scale(), 65536.0);
  for (int i = 1; i < 2000; ++i) ASSERT_TRUE(step(scaler, p, 1.0));
  EXPECT_EQ(scaler.scale(), 65536.0);
  ASSERT_TRUE(step(scaler, p, 1.0));
  EXPECT_EQ(scaler.scale(), 131072.0);
}

#if TP_TORCH_AT_LEAST(2, 3)
TEST(LossScaler, StepForStepAsPyTorchsGradScaler) {
  // Overflows early, twice in a row, and after a growth; 4,500 steps see two growths.
  const std::map<int, double> bad{{3, kInf}, {4, std::nan("")}, {5, kInf}, {2600, -kInf}};
  testing::TempDir dir;
  std::ostringstream program;
  program << "import math, torch\n"
             "bad = {3: math.inf, 4: math.nan, 5: math.inf, 2600: -math.inf}\n"
             "p = torch.nn.Parameter(torch.zeros(2))\n"
             "optimizer = torch.optim.SGD([p], lr=1e-9)\n"
             "scaler = torch.amp.GradScaler('cpu')\n"
             "for step in range(1, 4501):\n"
             "    optimizer.zero_grad()\n"
             "    scaler.scale((p * torch.tensor([1.0, bad.get(step, 1.0)])).sum()).backward()\n"
             "    before = p.detach().clone()\n"
             "    scaler.step(optimizer)\n"
             "    scaler.update()\n"
             "    print(step, int(torch.equal(before, p.detach())), int(scaler.get_scale()))\n";
  testing::write_text(dir / "grad_scaler.py", program.str());
  const std::string expected = testing::run_checked(TP_TORCH_PYTHON " " + (dir / "grad_scaler.py").string());

  LossScaler scaler;
  const torch::Tensor p = parameter();
  std::ostringstream ours;
  for (int i = 1; i <= 4500; ++i) {
    const auto found = bad.find(i);
    const bool applied = step(scaler, p, found == bad.end() ? 1.0 : found->second);
    ours << i << " " << (applied ? 0 : 1) << " " << scaler.scale() << "\n";
  }
  EXPECT_EQ(ours.str(), expected);
}
#endif

}  // namespace
}  // namespace tp::train
