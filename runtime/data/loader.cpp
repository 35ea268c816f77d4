#include "data/loader.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/error.h"

namespace tp::data {
namespace {

// An uninitialised tensor of `count` items shaped like `item`, page-locked if `pin`.
at::Tensor batch_like(const at::Tensor& item, std::int64_t count, bool pin) {
  std::vector<std::int64_t> shape{count};
  shape.insert(shape.end(), item.sizes().begin(), item.sizes().end());
  return at::empty(shape, item.options().pinned_memory(pin));
}

}  // namespace

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::size_t> indices, std::int64_t epoch,
               LoaderOptions options)
    : dataset_(std::move(dataset)), indices_(std::move(indices)), epoch_(epoch), options_(options) {
  if (options_.batch_size < 1 || options_.workers < 0 || options_.prefetch_per_worker < 1) {
    fail(ExitCode::internal, "loader: batch size {}, {} workers, prefetch {}", options_.batch_size,
         options_.workers, options_.prefetch_per_worker);
  }
  const auto batch = static_cast<std::size_t>(options_.batch_size);
  num_batches_ = options_.drop_last ? indices_.size() / batch : (indices_.size() + batch - 1) / batch;
  next_to_make_ = next_to_return_ = 0;
  limit_ =
      options_.workers == 0 ? 1 : static_cast<std::size_t>(options_.workers * options_.prefetch_per_worker);
  pin_ = options_.pin_memory && at::globalContext().hasCUDA();
  dataset_->will_read(indices_);
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

at::Tensor Loader::inputs_buffer(const at::Tensor& example, std::int64_t count, std::size_t batch_index) {
  if (pin_ || count != options_.batch_size) return batch_like(example, count, pin_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (InputBuffer& buffer : buffers_) {
      // Neither the caller nor any view of its memory still refers to it.
      if (buffer.tensor.use_count() == 1 && buffer.tensor.storage().use_count() == 1 &&
          buffer.tensor.sizes().slice(1) == example.sizes() && buffer.tensor.dtype() == example.dtype()) {
        buffer.batch = batch_index;
        return buffer.tensor;
      }
    }
  }
  at::Tensor tensor = batch_like(example, count, false);
  std::lock_guard<std::mutex> lock(mutex_);
  // Room for the batches being made or ready and the two the caller got last. Past that, the new buffer
  // replaces one the caller got more than two batches ago and still holds (it may keep it for good).
  if (buffers_.size() < limit_ + 2) {
    buffers_.push_back({tensor, batch_index});
    return tensor;
  }
  const auto kept = std::find_if(buffers_.begin(), buffers_.end(), [&](const InputBuffer& buffer) {
    return buffer.batch + 2 < next_to_return_;
  });
  if (kept != buffers_.end()) *kept = {tensor, batch_index};
  return tensor;
}

Batch Loader::make_batch(std::size_t batch_index) {
  const auto batch = static_cast<std::size_t>(options_.batch_size);
  const std::size_t begin = batch_index * batch;
  const std::size_t end = std::min(indices_.size(), begin + batch);
  const auto count = static_cast<std::int64_t>(end - begin);
  // The first example gives the shapes; the others are written straight into their slots of the batch.
  const Example first = dataset_->get(indices_[begin], epoch_);
  Batch out{inputs_buffer(first.input, count, batch_index), batch_like(first.target, count, pin_)};
  out.inputs[0].copy_(first.input);
  out.targets[0].copy_(first.target);
  for (std::int64_t i = 1; i < count; ++i) {
    at::Tensor slot = out.inputs[i];
    out.targets[i].copy_(dataset_->get_into(indices_[begin + static_cast<std::size_t>(i)], epoch_, slot));
  }
  return out;
}

void Loader::work() {
  while (true) {
    std::size_t batch_index = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Batches being made or ready never exceed the limit (bounded memory).
      changed_.wait(lock, [&] { return stopping_ || error_ || next_to_make_ < next_to_return_ + limit_; });
      if (stopping_ || error_ || next_to_make_ >= num_batches_) return;
      batch_index = next_to_make_++;
    }
    try {
      Batch batch = make_batch(batch_index);
      std::lock_guard<std::mutex> lock(mutex_);
      ready_.emplace(batch_index, std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_ || batch_index < error_batch_) {
        error_ = std::current_exception();
        error_batch_ = batch_index;
      }
    }
    changed_.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (next_to_return_ >= num_batches_) return std::nullopt;
  if (threads_.empty()) {
    Batch batch = make_batch(next_to_return_);
    ++next_to_return_;
    return batch;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  // Batches before a failed one are still delivered (they were started earlier); the error comes in order.
  changed_.wait(
      lock, [&] { return ready_.count(next_to_return_) > 0 || (error_ && next_to_return_ >= error_batch_); });
  if (ready_.count(next_to_return_) == 0) std::rethrow_exception(error_);
  auto node = ready_.extract(next_to_return_++);
  lock.unlock();
  changed_.notify_all();
  return std::move(node.mapped());
}

}  // namespace tp::data
