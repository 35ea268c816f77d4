// Batches of examples prepared by a pool of threads into a bounded queue, in order.
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/dataset.h"

namespace tp::data {

struct Batch {
  at::Tensor inputs;   // {B, ...}
  at::Tensor targets;  // {B} or {B, classes}
};

struct LoaderOptions {
  std::int64_t batch_size = 64;
  int workers = 2;              // 0: batches are made on the calling thread
  int prefetch_per_worker = 2;  // batches made ahead of the consumer at most: workers x prefetch_per_worker
  bool drop_last = false;       // drop a final partial batch
  // Collate into page-locked memory so the caller's `to(device, /*non_blocking=*/true)` overlaps the copy
  // with compute. Ignored without a CUDA device.
  bool pin_memory = false;
};

// Iterates once over `indices` of `dataset` (one rank's share of an epoch, from DistributedSampler).
// Memory bound: the loader holds at most max_batches_in_memory() batches (ready or being made; each worker
// makes one batch at a time), plus the batch the caller holds, plus one decoded image per worker. Full
// batches are filled into input buffers the caller has let go when there are any (new memory costs a page
// fault per 4 KiB written); up to max_batches_in_memory() + 2 such buffers are kept while the loader lives,
// including those in use.
// Pinned batches are left to LibTorch's pinned-memory cache, which knows when an asynchronous copy is done.
class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::size_t> indices, std::int64_t epoch,
         LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Batches in all.
  std::size_t num_batches() const { return num_batches_; }
  // The index of the next batch next() returns: the batches returned so far.
  std::size_t position() const { return next_to_return_; }
  std::size_t max_batches_in_memory() const { return limit_; }
  // The next batch in order, or nothing at the end. Rethrows a worker's error.
  std::optional<Batch> next();

 private:
  Batch make_batch(std::size_t batch_index);
  at::Tensor inputs_buffer(const at::Tensor& example, std::int64_t count, std::size_t batch_index);
  void work();

  std::shared_ptr<const Dataset> dataset_;
  std::vector<std::size_t> indices_;
  std::int64_t epoch_;
  LoaderOptions options_;
  std::size_t num_batches_;
  std::size_t limit_;
  bool pin_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::size_t, Batch> ready_;
  std::size_t next_to_make_;
  std::size_t next_to_return_;
  std::exception_ptr error_;
  std::size_t error_batch_ = 0;  // the earliest batch that failed
  bool stopping_ = false;
  // Input buffers of full batches; one whose only reference is this list is free to refill.
  struct InputBuffer {
    at::Tensor tensor;
    std::size_t batch;  // the batch it was last filled for
  };
  std::vector<InputBuffer> buffers_;
  std::vector<std::thread> threads_;
};

}  // namespace tp::data
