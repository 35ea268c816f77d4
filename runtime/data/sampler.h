// Which samples each rank sees in an epoch, with torch.utils.data.DistributedSampler's properties:
// every rank gets the same number of samples (padded by repeating from the start, or the remainder
// dropped), shares are disjoint apart from that padding, and the order is reshuffled each epoch
// from (seed, epoch) alone, so every rank computes the same permutation without communicating.
// That global order does not depend on the world size, and rank r takes its samples r, r + W, r + 2W...:
// after every rank has trained k samples, the samples trained are the order's first k x W. An epoch
// interrupted there resumes at `first_sample` = k x W with any world size, each remaining sample once.
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
};

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
