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
  at::Tensor targets;  // {B}
};

struct LoaderOptions {
  std::int64_t batch_size = 64;
  int workers = 2;             // 0: batches are made on the calling thread
  int prefetch_per_worker = 2; // ready batches held at most: workers x prefetch_per_worker
  bool drop_last = false;      // drop a final partial batch
};

// Iterates once over `indices` of `dataset`. Memory is bounded by the ready-batch limit plus one
// batch in progress per worker.
class Loader {
 public:
  Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::size_t> indices, std::int64_t epoch,
         LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  std::size_t num_batches() const { return num_batches_; }
  // The next batch in order, or nothing at the end. Rethrows a worker's error.
  std::optional<Batch> next();

 private:
  Batch make_batch(std::size_t batch_index) const;
  void work();

  std::shared_ptr<const Dataset> dataset_;
  std::vector<std::size_t> indices_;
  std::int64_t epoch_;
  LoaderOptions options_;
  std::size_t num_batches_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::size_t, Batch> ready_;
  std::size_t next_to_make_ = 0;
  std::size_t next_to_return_ = 0;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tp::data
