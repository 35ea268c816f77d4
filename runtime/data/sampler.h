// Which samples each rank sees in an epoch, with torch.utils.data.DistributedSampler's properties:
// every rank gets the same number of samples (padded by repeating from the start, or the remainder
// dropped), shares are disjoint apart from that padding, and the order is reshuffled each epoch
// from (seed, epoch) alone, so every rank computes the same permutation without communicating.
// That global order does not depend on the world size, and rank r takes its samples r, r + W, r + 2W...:
// after every rank has trained k samples, the samples trained are the order's first k x W. An epoch
// interrupted there resumes at `first_sample` = k x W with any world size, each remaining sample once.
// Packed shards (data.format = "shards") keep all of that and change only the global order: the shards in a
// new order each epoch, their samples one after another, shuffled within consecutive blocks of
// `shuffle_buffer` samples, so that the samples read at any time come from the one or two shards (or, for a
// block larger than a shard, the few) that their block spans, and a shard is on disk only while they are read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tp::data {

struct SamplerOptions {
  std::size_t dataset_size = 0;
  int rank = 0;
  int world_size = 1;
  bool shuffle = true;
  bool drop_last = false;  // drop the tail instead of padding it
  std::uint64_t seed = 0;
  // Packed shards: the samples of each shard (dataset_size in all), shard after shard, and the size of the
  // blocks shuffled within. Empty: the order is a permutation of the whole dataset.
  std::vector<std::size_t> shard_sizes;
  std::size_t shuffle_buffer = 1;
};

// The global order of one epoch, before it is split over the ranks: what DistributedSampler::indices deals out.
std::vector<std::size_t> epoch_order(const SamplerOptions& options, std::int64_t epoch);

class DistributedSampler {
 public:
  explicit DistributedSampler(SamplerOptions options);
  // This rank's sample indices for `epoch` from the global order's `first_sample` on, in order.
  std::vector<std::size_t> indices(std::int64_t epoch, std::size_t first_sample = 0) const;
  // How many indices() returns: the same on every rank.
  std::size_t samples_per_rank(std::size_t first_sample = 0) const;

 private:
  SamplerOptions options_;
};

}  // namespace tp::data
