// Which samples each rank sees in an epoch, with torch.utils.data.DistributedSampler's properties:
// every rank gets the same number of samples (padded by repeating from the start, or the remainder
// dropped), shares are disjoint apart from that padding, and the order is reshuffled each epoch
// from (seed, epoch) alone, so every rank computes the same permutation without communicating.
// Rank r takes the global order's samples r, r + W, r + 2W...: after every rank has trained k samples, the
// samples trained are the order's first k x W. An epoch interrupted there resumes at `first_sample` = k x W
// with any world size, each remaining sample once.
//
// Packed shards (data.format = "shards") keep all of that and are read by nodes, not by ranks. The shards
// come in a new order each epoch, their samples one after another; that sequence is cut into one stretch per
// node (rank r is on node r / ranks_per_node), of exactly the samples its ranks train, and each stretch is
// shuffled within consecutive blocks of `shuffle_buffer` samples. The global order deals round by round:
// each round of W positions holds node 0's next ranks_per_node samples, then node 1's, and so on, so that
// rank r's samples all come from its node's stretch. A node thus reads its own shards, about 1/nodes of
// them, one or two at a time (those its current block spans); only a shard cut at a stretch's end is read
// by two nodes. With one node this is the whole sequence shuffled in blocks, whatever the world size.
//
// The order depends on how the ranks stand in nodes, so an epoch resumed by a job of another shape changes
// the order only of what is left: the samples not yet trained, in the shard sequence's order, are cut anew
// for the new nodes (a `RankLayout` per stretch of the epoch, from the checkpoint).
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
  int ranks_per_node = 1;  // packed shards: the ranks that share a node's shards (world_size is a multiple)
};

// The ranks that trained an epoch from its global order's position `from_sample` on: `world_size` ranks in
// nodes of `ranks_per_node`.
struct RankLayout {
  std::size_t from_sample = 0;
  int world_size = 1;
  int ranks_per_node = 1;
};

// The global order of one epoch, before it is split over the ranks: what DistributedSampler::indices deals
// out. `layouts`: the stretches of the epoch (from_sample ascending, the first 0); empty: a fresh epoch's, the
// options' own layout from the start.
std::vector<std::size_t> epoch_order(const SamplerOptions& options, std::int64_t epoch,
                                     const std::vector<RankLayout>& layouts = {});

class DistributedSampler {
 public:
  explicit DistributedSampler(SamplerOptions options);
  // This rank's sample indices for `epoch` from the global order's `first_sample` on, in order. `layouts` as
  // for epoch_order; the last must be the options' layout, from first_sample or before.
  std::vector<std::size_t> indices(std::int64_t epoch, std::size_t first_sample = 0,
                                   const std::vector<RankLayout>& layouts = {}) const;
  // How many indices() returns: the same on every rank.
  std::size_t samples_per_rank(std::size_t first_sample = 0) const;

 private:
  SamplerOptions options_;
};

}  // namespace tp::data
