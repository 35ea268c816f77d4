#include "train/precision.h"

#include <spdlog/spdlog.h>
#include <torch/script.h>
#include <torch/torch.h>

#include "common/cpu.h"
#include "common/error.h"
#include "dist/c10d_compat.h"

namespace tp::train {

at::Tensor LossScaler::scaled(const at::Tensor& loss) const { return loss * scale_; }

bool LossScaler::unscale(const std::vector<at::Tensor>& parameters) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& parameter : parameters) {
    if (parameter.grad().defined()) grads.push_back(parameter.grad());
  }
  // One device-to-host sync for all the gradients, not one per tensor.
  std::vector<torch::Tensor> finite_each;
  for (const auto& grad : grads) finite_each.push_back(torch::isfinite(grad).all());
  const bool finite = finite_each.empty() || torch::stack(finite_each).all().item<bool>();
  if (!finite) {
    scale_ /= 2;
    good_steps_ = 0;
    spdlog::debug("fp16: gradients overflowed; step skipped, loss scale now {:g}", scale_);
    return false;
  }
  for (auto& grad : grads) grad.mul_(1.0 / scale_);
  if (++good_steps_ == 2000) {
    scale_ *= 2;
    good_steps_ = 0;
  }
  return true;
}

Precision::Precision(spec::Precision precision, c10::Device device) : device_(device.type()) {
  switch (precision) {
    case spec::Precision::fp32:
      break;
    case spec::Precision::bf16:
      autocast_ = at::kBFloat16;
      if (!device.is_cuda() && cpu_computes_bf16() == false) {
        spdlog::warn("train.precision = bf16 on a CPU without bf16 instructions (no avx512_bf16, amx_bf16 or bf16 "
                     "in /proc/cpuinfo): PyTorch emulates bf16 here, about 10x slower than fp32 "
                     "(docs/benchmarks.md); fp32 trains faster on this CPU");
      }
      break;
    case spec::Precision::fp16:
      if (!device.is_cuda()) {
        fail(ExitCode::usage, "train.precision = fp16 needs a CUDA device, and this rank trains on the CPU: use "
             "bf16 (CPU autocast) or fp32");
      }
      autocast_ = at::kHalf;
      scaler_.emplace();
      break;
  }
}

at::Tensor Precision::forward(torch::jit::Module& model, const at::Tensor& inputs) const {
  if (!autocast_) return model.forward({inputs}).toTensor();
  struct Scope {  // leaving drops the weights' cached casts, as torch.autocast does on exit
    at::DeviceType device;
    at::ScalarType dtype;
    ~Scope() { dist::compat::set_autocast(device, false, dtype); }
  } scope{device_, *autocast_};
  dist::compat::set_autocast(device_, true, *autocast_);
  return model.forward({inputs}).toTensor().to(torch::kFloat);
}

}  // namespace tp::train
