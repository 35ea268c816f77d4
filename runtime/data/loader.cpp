#include "data/loader.h"

#include <ATen/ATen.h>

namespace tp::data {

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::size_t> indices, std::int64_t epoch,
               LoaderOptions options)
    : dataset_(std::move(dataset)), indices_(std::move(indices)), epoch_(epoch), options_(options) {
  const auto batch = static_cast<std::size_t>(options_.batch_size);
  num_batches_ = options_.drop_last ? indices_.size() / batch : (indices_.size() + batch - 1) / batch;
  for (int i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { work(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (auto& thread : threads_) thread.join();
}

Batch Loader::make_batch(std::size_t batch_index) const {
  const auto batch = static_cast<std::size_t>(options_.batch_size);
  const std::size_t begin = batch_index * batch;
  const std::size_t end = std::min(indices_.size(), begin + batch);
  std::vector<at::Tensor> inputs, targets;
  inputs.reserve(end - begin);
  targets.reserve(end - begin);
  for (std::size_t i = begin; i < end; ++i) {
    Example example = dataset_->get(indices_[i], epoch_);
    inputs.push_back(std::move(example.input));
    targets.push_back(std::move(example.target));
  }
  return {at::stack(inputs), at::stack(targets)};
}

void Loader::work() {
  const std::size_t limit = static_cast<std::size_t>(options_.workers * options_.prefetch_per_worker);
  while (true) {
    std::size_t batch_index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Wait while the queue of ready batches is full (bounded memory).
      changed_.wait(lock, [&] { return stopping_ || next_to_make_ < next_to_return_ + limit; });
      if (stopping_ || next_to_make_ >= num_batches_ || error_) return;
      batch_index = next_to_make_++;
    }
    try {
      Batch batch = make_batch(batch_index);
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(batch_index, std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (next_to_return_ >= num_batches_) return std::nullopt;
  if (threads_.empty()) return make_batch(next_to_return_++);
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return error_ || ready_.count(next_to_return_) > 0; });
  if (error_) std::rethrow_exception(error_);
  auto node = ready_.extract(next_to_return_++);
  lock.unlock();
  changed_.notify_all();
  return std::move(node.mapped());
}

}  // namespace tp::data
