// model.weights: initial weights copied by name from a TorchScript module, a state dict saved by
// Python, or a trainpoint checkpoint.
#include <spdlog/spdlog.h>
#include <torch/script.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>

#include "common/error.h"
#include "model/builtins.h"
#include "model/model.h"

namespace tp::model {
namespace {

using TensorMap = std::map<std::string, torch::Tensor>;

// A checkpoint (train/checkpoint.cpp) stores the model's tensors as "model.<name>" and "buffer.<name>"
// next to the optimizer's; those prefixes are dropped and the rest ignored.
TensorMap from_module(const torch::jit::Module& module) {
  TensorMap tensors;
  for (const auto& parameter : module.named_parameters()) tensors.emplace(parameter.name, parameter.value);
  for (const auto& buffer : module.named_buffers()) tensors.emplace(buffer.name, buffer.value);
  const bool is_checkpoint = module.hasattr("position.step");
  if (!is_checkpoint) return tensors;
  TensorMap model_tensors;
  for (const auto& [name, tensor] : tensors) {
    for (const std::string prefix : {"model.", "buffer."}) {
      if (name.rfind(prefix, 0) == 0) model_tensors.emplace(name.substr(prefix.size()), tensor);
    }
  }
  return model_tensors;
}

// torch.save(state_dict) of Python: a dict of tensors, or one nested under "model" (fastai's
// Learner.save) or "state_dict" (Lightning).
TensorMap from_state_dict(const c10::IValue& value, const std::string& as_named) {
  if (!value.isGenericDict()) {
    fail(ExitCode::model, "model.weights: {} holds a {}, not a dict of tensors", as_named, value.tagKind());
  }
  const c10::Dict<c10::IValue, c10::IValue> dict = value.toGenericDict();
  for (const char* nested : {"model", "state_dict"}) {
    const auto found = dict.find(nested);
    if (found != dict.end() && found->value().isGenericDict())
      return from_state_dict(found->value(), as_named);
  }
  TensorMap tensors;
  for (const auto& entry : dict) {
    if (entry.key().isString() && entry.value().isTensor()) {
      tensors.emplace(entry.key().toStringRef(), entry.value().toTensor());
    }
  }
  return tensors;
}

TensorMap read_tensors(const std::filesystem::path& file, const std::string& as_named) {
  if (!std::filesystem::is_regular_file(file)) {
    fail(ExitCode::model, "model.weights: {} not found in the repository", as_named);
  }
  try {
    return from_module(torch::jit::load(file.string()));
  } catch (const c10::Error&) {
    std::ifstream in(file, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      return from_state_dict(torch::pickle_load(bytes), as_named);
    } catch (const c10::Error&) {
      // libtorch's unpickler cannot rebuild an OrderedDict, which is what model.state_dict() returns.
      fail(ExitCode::model,
           "model.weights: {} is neither a TorchScript module nor a dict of tensors saved by torch.save; "
           "save a state dict as torch.save(dict(model.state_dict()), path)",
           as_named);
    }
  }
}

std::string shape_text(const torch::Tensor& tensor) {
  return fmt::format("[{}]", fmt::join(tensor.sizes(), ", "));
}

// At most `limit` items, then how many more.
std::string listing(const std::vector<std::string>& items, std::size_t limit = 10) {
  std::string text;
  for (std::size_t i = 0; i < std::min(items.size(), limit); ++i) text += (i ? ", " : "") + items[i];
  if (items.size() > limit) text += fmt::format(" and {} more", items.size() - limit);
  return text;
}

}  // namespace

void load_weights(torch::jit::Module& model, const std::filesystem::path& file, const std::string& as_named) {
  TensorMap source = read_tensors(file, as_named);
  const std::vector<std::string> head = head_parameter_names(model);
  std::vector<std::pair<std::string, torch::Tensor>> targets;
  for (const auto& parameter : model.named_parameters())
    targets.emplace_back(parameter.name, parameter.value);
  for (const auto& buffer : model.named_buffers()) targets.emplace_back(buffer.name, buffer.value);

  std::vector<std::string> missing, mismatched, skipped_head;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> copies;
  for (const auto& [name, target] : targets) {
    const auto found = source.find(name);
    if (found == source.end()) {
      missing.push_back(name);
      continue;
    }
    const torch::Tensor value = found->second;
    source.erase(found);
    if (value.sizes() == target.sizes()) {
      copies.emplace_back(target, value);
    } else if (std::find(head.begin(), head.end(), name) != head.end()) {
      skipped_head.push_back(fmt::format("{} {} (model {})", name, shape_text(value), shape_text(target)));
    } else {
      mismatched.push_back(fmt::format("{} {} (model {})", name, shape_text(value), shape_text(target)));
    }
  }
  std::vector<std::string> unexpected;
  for (const auto& entry : source) unexpected.push_back(entry.first);
  if (!missing.empty() || !mismatched.empty() || !unexpected.empty()) {
    std::string problems;
    if (!missing.empty()) problems += fmt::format("; missing: {}", listing(missing));
    if (!mismatched.empty()) problems += fmt::format("; other shape: {}", listing(mismatched));
    if (!unexpected.empty()) problems += fmt::format("; not in the model: {}", listing(unexpected));
    fail(ExitCode::model, "model.weights: {} does not fit the model{}", as_named, problems);
  }
  torch::NoGradGuard no_grad;
  for (auto& [target, value] : copies) target.copy_(value);
  if (!skipped_head.empty()) {
    spdlog::info("model.weights: {}: the head keeps its fresh initialisation, its shape differs: {}",
                 as_named, listing(skipped_head));
  }
  spdlog::info("model.weights: loaded {} tensors from {}", copies.size(), as_named);
}

}  // namespace tp::model
