// train.precision on one device: autocast of the forward pass (bf16 on the CPU or CUDA, fp16 on CUDA) and, for
// fp16, dynamic loss scaling as torch.cuda.amp.GradScaler does it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <optional>
#include <vector>

#include "spec/spec.h"

namespace torch::jit {
struct Module;
}

namespace tp::train {

// fp16's dynamic loss scaling with torch.cuda.amp.GradScaler's defaults and rules: the loss is multiplied by
// the scale (first 2^16) before backward; a step whose gradients hold an inf or a NaN is skipped and the
// scale halved (backoff_factor 0.5); after 2000 steps in a row without one (growth_interval) it doubles
// (growth_factor 2).
class LossScaler {
 public:
  double scale() const { return scale_; }
  at::Tensor scaled(const at::Tensor& loss) const;
  // After the all-reduce (every rank has the same gradients, so every rank decides the same): divides the
  // gradients by the scale and updates it. False when they overflowed: the step must be skipped.
  bool unscale(const std::vector<at::Tensor>& parameters);

 private:
  double scale_ = 65536.0;
  int good_steps_ = 0;
};

class Precision {
 public:
  // fp16 on the CPU is a usage error (the device plan, dist/device_plan.h, refuses it first in a run).
  Precision(spec::Precision precision, c10::Device device);

  // The model's output in fp32: losses and metrics are computed in full precision.
  at::Tensor forward(torch::jit::Module& model, const at::Tensor& inputs) const;
  at::Tensor scaled(const at::Tensor& loss) const { return scaler_ ? scaler_->scaled(loss) : loss; }
  // False when the step must be skipped (fp16 gradients overflowed); see LossScaler::unscale.
  bool unscale(const std::vector<at::Tensor>& parameters) { return !scaler_ || scaler_->unscale(parameters); }

 private:
  at::DeviceType device_;
  std::optional<at::ScalarType> autocast_;
  std::optional<LossScaler> scaler_;
};

}  // namespace tp::train
