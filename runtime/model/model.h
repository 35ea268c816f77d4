// Models are TorchScript modules, built-in or loaded from the repository, so every model trains
// the same way and saves as TorchScript that Python's torch.jit.load reads.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <filesystem>

#include "data/dataset.h"
#include "spec/spec.h"

namespace tp::model {

// Builds `spec.arch` for data of `schema`, initialised from `seed`, or loads `spec.torchscript`
// (relative to `root`). Throws tp::Error (ExitCode::model) naming the file or the mismatch.
torch::jit::Module create(const spec::ModelSpec& spec, const data::Schema& schema, const std::filesystem::path& root,
                          std::uint64_t seed);

}  // namespace tp::model
