// The built-in architectures and weight loading behind model::create. Internal to tp_model.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/schema.h"

namespace tp::model {

// The model attribute naming the top-level submodules that run in NCHW on the CPU (see kept_nchw_on_cpu).
inline constexpr char kCpuNchwModules[] = "cpu_nchw_modules";

// resnet18 | resnet34 | resnet50, as torchvision's, for images of schema.input_shape[0] channels; ResNet-18's
// and -34's last stage in NCHW for images up to 64 pixels (resnet.cpp says why).
torch::jit::Module resnet(const std::string& arch, const data::Schema& schema);

// fastai's tabular model on table_csv features: see tabular.cpp.
torch::jit::Module tabular(const std::vector<std::int64_t>& hidden, const data::Schema& schema);

// Copies the tensors of `file` (shown as `as_named`) into `model`: see model.h (model.weights).
void load_weights(torch::jit::Module& model, const std::filesystem::path& file, const std::string& as_named);

}  // namespace tp::model
