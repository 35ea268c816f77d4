// Models are TorchScript modules, built-in or loaded from the repository, so every model trains
// the same way and saves as TorchScript that Python's torch.jit.load reads.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/schema.h"
#include "spec/spec.h"

namespace tp::model {

// Builds `spec.arch` for data of `schema`, initialised from `seed`, or loads `spec.torchscript`
// (relative to `root`), then copies in `spec.weights` when set: a TorchScript module, a state dict
// saved by Python's torch.save (a dict of tensors, or one under "model" or "state_dict") or a
// trainpoint checkpoint. Every parameter and buffer of the model must be found there with its shape
// and no other tensor may be left over; only the head's (head_parameter_names) may differ in shape
// (another number of classes): they keep their fresh values, with a log line.
// The model carries what using it needs, as attributes that torch.jit.load keeps (lists, not tensors, so
// they are no parameters or buffers): `task` (classification, multi_label or regression), `class_names`
// (classification, multi-label); for table_csv `feature_names` (the input columns, categories one-hot as
// "column=value"), `feature_mean` and `feature_std` (the input is (x - mean) / std, statistics of the
// training split), `feature_fill` (what a missing number stands for); for images `image_size`, `channels`,
// `resize` ("stretch" or "crop") and `pixel_mean` and `pixel_std` (the input is (pixel / 255 - mean) / std).
// A TorchScript module is first run on two samples of the data: its outputs must match the classes. An earlier model.pt trained again takes the new data's; an attribute of the
// same name that is the model's own (another type) is kept, with a warning.
// Throws tp::Error (ExitCode::model) naming the file, the missing, unexpected or mismatched keys.
torch::jit::Module create(const spec::ModelSpec& spec, const data::Schema& schema,
                          const std::filesystem::path& root, std::uint64_t seed);

// What create() saved in a model about its data, read back (`trainpoint predict` makes its inputs by it): the
// task, classes, input shape and preprocessing. Throws tp::Error(model) naming `name` when the model lacks them
// (a TorchScript module trainpoint did not save).
data::Schema saved_schema(const torch::jit::Module& model, const std::string& name);

// Transfer learning (fastai's fine_tune): the head is the last top-level submodule that has
// parameters: `fc` of the ResNets, `head` of mlp and tabular, `fc2` of small_cnn, the last child of a
// user's TorchScript module (`fc` of torchvision's models, `1` of a fastai Sequential(body, head)).
// Returns its parameters' names as named_parameters() gives them (e.g. "fc.weight", "fc.bias"), so the
// training loop can put them in their own optimizer group. Throws tp::Error (model) when the model
// has no submodule with parameters.
std::vector<std::string> head_parameter_names(const torch::jit::Module& model);

// trainable = false freezes the body: requires_grad becomes false for every parameter outside the
// head, except the weight and bias of BatchNorm layers, which keep training as in fastai's freeze
// (train_bn=True). trainable = true unfreezes everything. Running statistics follow train()/eval()
// as usual. Parameters keep their identity, so an optimizer built before stays valid (frozen ones
// get no gradient and are skipped by SGD and Adam(W)).
void set_body_trainable(torch::jit::Module& model, bool trainable);

// Whether `spec` is one of the built-in convolutional nets (small_cnn, the ResNets), which train correctly
// and at least as fast in channels_last memory format (train.channels_last = "auto").
bool is_built_in_convnet(const spec::ModelSpec& spec);

// Whether the parameter `parameter_name` (as named_parameters() names it) belongs to a top-level submodule that
// the model runs in NCHW on the CPU, listed in its `cpu_nchw_modules` attribute (ResNet-18's and -34's last stage
// for images up to 64 pixels: faster there than channels_last). Its forward makes that submodule's input NCHW;
// training on the CPU keeps its 4-D weights NCHW too, since a convolution with either in channels_last runs
// in channels_last.
bool kept_nchw_on_cpu(const torch::jit::Module& model, const std::string& parameter_name);

// Process-wide settings for training, as the trainer and the benchmarks apply them:
// - TorchScript modules run op by op, as eager PyTorch does. The graph executor's optimizations
//   (profiling, differentiable subgraphs) made training steps 5-40% slower on the CPU (bench/train: small
//   CNN and ResNet-18), and a training run has no use for them.
// - Freed memory is kept for the next step instead of going back to the kernel (common/memory.h).
void configure_process_for_training();

// Intra-op compute threads for the whole process: LibTorch's pool and, when LibTorch's BLAS is OpenBLAS,
// OpenBLAS's own pool, which otherwise keeps one thread per core whatever LibTorch is told. Its idle
// threads spin: with LibTorch at 1 thread they burned half the CPU time of a small CNN's step on 2
// cores (bench/train), and with several ranks on a node they take cores from the other ranks.
void set_compute_threads(int threads);

}  // namespace tp::model
