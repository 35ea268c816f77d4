#include "data/dataset.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "common/log.h"

namespace tp::data {

TensorDataset::TensorDataset(at::Tensor inputs, at::Tensor targets, std::vector<std::string> names)
    : inputs_(std::move(inputs)), targets_(std::move(targets)), names_(std::move(names)) {
  if (inputs_.size(0) != targets_.size(0)) {
    fail(ExitCode::data, "{} inputs but {} targets", inputs_.size(0), targets_.size(0));
  }
  if (!names_.empty() && static_cast<std::int64_t>(names_.size()) != inputs_.size(0)) {
    fail(ExitCode::internal, "{} inputs but {} sample names", inputs_.size(0), names_.size());
  }
}

std::string TensorDataset::describe(std::size_t index) const {
  return names_.empty() ? Dataset::describe(index) : names_.at(index);
}

std::size_t TensorDataset::size() const {
  return static_cast<std::size_t>(inputs_.size(0));
}

Example TensorDataset::get(std::size_t index, std::int64_t /*epoch*/) const {
  const auto i = static_cast<std::int64_t>(index);
  return {inputs_[i], targets_[i]};
}

void BadFiles::report(const std::string& file, const std::string& reason) {
  std::size_t count = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!files_.insert(file).second) return;
    count = files_.size();
  }
  spdlog::warn("skipping a bad file ({} so far): {}", count, reason);
  if (static_cast<std::int64_t>(count) > limit_) {
    fail(ExitCode::data, "{} bad files, more than data.max_bad_files = {}; the last: {}", count, limit_,
         reason);
  }
}

std::vector<std::string> BadFiles::files() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {files_.begin(), files_.end()};
}

SubsetDataset::SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<std::size_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {}

Example SubsetDataset::get(std::size_t index, std::int64_t epoch) const {
  return base_->get(indices_.at(index), epoch);
}

at::Tensor Dataset::get_into(std::size_t index, std::int64_t epoch, at::Tensor& input) const {
  Example example = get(index, epoch);
  input.copy_(example.input);
  return example.target;
}

at::Tensor SubsetDataset::get_into(std::size_t index, std::int64_t epoch, at::Tensor& input) const {
  return base_->get_into(indices_.at(index), epoch, input);
}

std::string SubsetDataset::describe(std::size_t index) const {
  return base_->describe(indices_.at(index));
}

std::string SubsetDataset::sample_name(std::size_t index) const {
  return base_->sample_name(indices_.at(index));
}

void SubsetDataset::will_read(const std::vector<std::size_t>& indices) const {
  std::vector<std::size_t> base_indices;
  base_indices.reserve(indices.size());
  for (const std::size_t index : indices) base_indices.push_back(indices_.at(index));
  base_->will_read(base_indices);
}

}  // namespace tp::data
