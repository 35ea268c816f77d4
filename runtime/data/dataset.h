// Datasets: indexable collections of (input, target) examples, safe to read from many threads.
// Header kept free of torch/torch.h: ATen's tensor type is enough here.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "data/file_store.h"
#include "data/schema.h"
#include "spec/spec.h"

namespace tp::data {

struct Example {
  at::Tensor input;   // one sample: {C, H, W} float for images, {features} float for tables
  at::Tensor target;  // scalar: int64 class index, or float for regression
};

// Corrupted or unsupported files met while reading, shared by a run's datasets and threads.
class BadFiles {
 public:
  explicit BadFiles(std::int64_t limit) : limit_(limit) {}
  // Warns the first time `file` is reported; throws tp::Error (data) once more than `limit` files are bad.
  void report(const std::string& file, const std::string& reason);
  std::vector<std::string> files() const;  // sorted, for the run record

 private:
  std::int64_t limit_;
  mutable std::mutex mutex_;
  std::set<std::string> files_;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  // Thread-safe. `epoch` seeds random augmentation, so a sample's transform depends only on
  // (seed, epoch, index). Throws tp::Error (ExitCode::data) naming the sample on failure.
  virtual Example get(std::size_t index, std::int64_t epoch) const = 0;
  // Like get(), but writes the input into `input` (contiguous, shaped like one sample: a slot of a batch) and
  // returns the target, so that batches are filled without an intermediate copy. The default copies get().
  virtual at::Tensor get_into(std::size_t index, std::int64_t epoch, at::Tensor& input) const;
  // A human-readable name of a sample (its file), for messages.
  virtual std::string describe(std::size_t index) const { return "sample " + std::to_string(index); }
  // The sample as the user finds it in the data, for outputs such as the report's top losses: an image file
  // relative to the data's folder, a CSV file's name and line ("train.csv:17"). Defaults to describe().
  virtual std::string sample_name(std::size_t index) const { return describe(index); }
  // The samples about to be read, in order: streamed data is fetched ahead in this order.
  virtual void will_read(const std::vector<std::size_t>& /*indices*/) const {}
};

// Examples held in memory as two tensors whose first dimension indexes samples.
// `names`, when given, names each sample (sample_name and describe), one per row.
class TensorDataset final : public Dataset {
 public:
  TensorDataset(at::Tensor inputs, at::Tensor targets, std::vector<std::string> names = {});
  std::size_t size() const override;
  Example get(std::size_t index, std::int64_t epoch) const override;
  std::string describe(std::size_t index) const override;

 private:
  at::Tensor inputs_;
  at::Tensor targets_;
  std::vector<std::string> names_;
};

// The rows of `base` listed in `indices` (a validation split, for example).
class SubsetDataset final : public Dataset {
 public:
  SubsetDataset(std::shared_ptr<const Dataset> base, std::vector<std::size_t> indices);
  std::size_t size() const override { return indices_.size(); }
  Example get(std::size_t index, std::int64_t epoch) const override;
  at::Tensor get_into(std::size_t index, std::int64_t epoch, at::Tensor& input) const override;
  std::string describe(std::size_t index) const override;
  std::string sample_name(std::size_t index) const override;
  void will_read(const std::vector<std::size_t>& indices) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<std::size_t> indices_;
};

struct Datasets {
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> valid;  // may be empty (size 0) when data.valid = 0
  Schema schema;
  std::shared_ptr<BadFiles> bad_files;  // never null
  // The data is this rank's own share (sharded staging), not the whole dataset: the sampler must
  // not split it across ranks again.
  bool rank_share = false;
  // Packed shards: the training samples of each shard, in dataset order (data/sampler.h's shard order).
  std::vector<std::size_t> train_shard_sizes;
  // The ranks that share one node's store (its shard cache): packed shards are dealt to nodes of this many
  // ranks (data/sampler.h).
  int ranks_per_node = 1;
};

// Opens the data a spec names. Relative paths are resolved from `root` (the repository checkout); image
// files are listed and read through `store`. Throws tp::Error (ExitCode::data) naming the path and what is
// wrong.
Datasets open(const spec::DataSpec& spec, const std::filesystem::path& root, std::uint64_t seed,
              const std::shared_ptr<const FileStore>& store = local_files());

}  // namespace tp::data
